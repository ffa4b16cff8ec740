//! [`GroupMemory`] <-> the group's status and annotations (pure).
//!
//! The operator keeps the memory `decide` returned between polls; it loads it from the
//! persisted forms only when it becomes leader (or first sees a group). What core marks
//! *volatile* is re-derived conservatively here:
//!
//! - `authority_issued_at` is re-stamped to the load time (core: "re-stamped after a restart");
//! - detection restarts its streak (`failing_since` unknown), so a restart can only delay a
//!   failure detection by at most one detection floor, never hasten it;
//! - the emergency failover in flight is recovered by core from the sidecars' move notice.
//!
//! The anti-flap cooldown is persisted twice (status `cooldownUntil` and the annotation
//! `bloodraven.shipstream.io/cooldown-until`); either copy alone restores it, the later wins
//! (seed 001: losing it takes both paths lost).

use std::collections::BTreeMap;

use bloodraven_api::{
    names, AuthorityState, AuthorityStatus, Condition, Flavor, HealthStatus, MysqlFailoverGroup,
    MysqlFailoverGroupSpec, MysqlFailoverGroupStatus, PlannedFailoverPhase, PlannedFailoverStatus,
    SiteRole, SiteStatus, Timestamp,
};
use bloodraven_core::engine::{
    AuthorityValidity, Detection, GroupAnnotations, InvalidReason, PlannedFailover, PodRole,
    SiteMemory, SiteState,
};
use bloodraven_core::GroupMemory;
use bloodraven_mysql::GtidSet;

/// Condition type: the group has a confirmed writable active site.
pub const CONDITION_READY: &str = "Ready";
/// Condition type: some site is failed or unreachable.
pub const CONDITION_DEGRADED: &str = "Degraded";

/// The group's annotations that `decide` reads.
pub fn annotations_of(group: &MysqlFailoverGroup) -> GroupAnnotations {
    let empty = BTreeMap::new();
    let annotations = group.metadata.annotations.as_ref().unwrap_or(&empty);
    GroupAnnotations {
        planned_failover: annotations
            .get(names::ANNOTATION_PLANNED_FAILOVER)
            .map(|site| site.trim().to_string())
            .filter(|site| !site.is_empty()),
        revoke_deployment_leases: annotations
            .contains_key(names::ANNOTATION_REVOKE_DEPLOYMENT_LEASES),
        cooldown_until: annotations
            .get(names::ANNOTATION_COOLDOWN_UNTIL)
            .and_then(|text| text.parse().ok()),
    }
}

/// The memory persisted in `status` and the annotation copy of the cooldown, loaded at `now`.
/// A group never polled (no status, or generation 0 without sites) starts from
/// [`GroupMemory::initial`].
pub fn memory_from(
    spec: &MysqlFailoverGroupSpec,
    status: Option<&MysqlFailoverGroupStatus>,
    annotations: &GroupAnnotations,
    now: Timestamp,
) -> GroupMemory {
    let mut memory = GroupMemory::initial(spec);
    let cooldown_from_annotation = annotations.cooldown_until;
    let Some(status) = status else {
        memory.cooldown_until = cooldown_from_annotation;
        return memory;
    };
    if let Some(active) = status
        .active_site
        .as_ref()
        .filter(|site| spec.site(site).is_some())
    {
        memory.active_site = active.clone();
    }
    memory.topology_generation = status.topology_generation;
    memory.authority_issued_at = (memory.topology_generation > 0).then_some(now);
    memory.authority = match &status.authority {
        Some(AuthorityStatus {
            state: AuthorityState::Valid,
            ..
        }) => AuthorityValidity::Valid,
        Some(AuthorityStatus { reason, .. }) => AuthorityValidity::Invalid(
            reason
                .as_deref()
                .and_then(invalid_reason)
                .unwrap_or(InvalidReason::NotIssued),
        ),
        None => AuthorityValidity::Invalid(InvalidReason::NotIssued),
    };
    let flavor = mysql_flavor(spec.flavor);
    memory.sites = spec
        .sites
        .iter()
        .map(|site_spec| {
            let persisted = status.sites.iter().find(|site| site.name == site_spec.name);
            site_memory(&site_spec.name, &memory.active_site, persisted, flavor)
        })
        .collect();
    memory.cooldown_until = later(status.cooldown_until, cooldown_from_annotation);
    memory.planned_failover = status
        .planned_failover
        .as_ref()
        .map(|planned| planned_memory(planned, &memory, annotations, now));
    memory.emergency_failover = None;
    memory.last_failover = status.last_failover.clone();
    memory
}

/// The later of two optional instants.
pub fn later(first: Option<Timestamp>, second: Option<Timestamp>) -> Option<Timestamp> {
    match (first, second) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

fn site_memory(
    name: &str,
    active_site: &str,
    persisted: Option<&SiteStatus>,
    flavor: bloodraven_mysql::Flavor,
) -> SiteMemory {
    let role = persisted
        .and_then(|site| site.role.as_deref())
        .map(pod_role)
        .unwrap_or(PodRole::Replica);
    let state = if name == active_site {
        SiteState::Active
    } else if role == PodRole::Fenced {
        SiteState::Demoted
    } else {
        SiteState::Replica
    };
    let mut memory = SiteMemory::new(name, state);
    let Some(site) = persisted else {
        return memory;
    };
    memory.consecutive_failures = site.consecutive_failures;
    // The streak start is volatile: a restart re-times it, so detection can only get later.
    memory.detection = if site.consecutive_failures == 0 {
        Detection::Up
    } else {
        Detection::Suspect
    };
    memory.last_seen = site.last_seen;
    memory.gtid_executed = site
        .gtid_executed
        .as_deref()
        .and_then(|text| GtidSet::parse(flavor, text).ok());
    memory.errant = site
        .errant_gtid_set
        .as_deref()
        .and_then(|text| GtidSet::parse(flavor, text).ok());
    memory.reachable = site.reachable;
    memory.writable = site.writable;
    memory.fenced = site.fenced;
    memory.replicating = site.replicating;
    memory.source_host = site.source_host.clone();
    memory.seconds_behind_source = site.seconds_behind_source;
    memory.healthy = site.healthy;
    memory.role = role;
    memory
}

fn planned_memory(
    planned: &PlannedFailoverStatus,
    memory: &GroupMemory,
    annotations: &GroupAnnotations,
    now: Timestamp,
) -> PlannedFailover {
    let requested_at = planned.requested_at.unwrap_or(now);
    let promoted = match planned.phase {
        PlannedFailoverPhase::Promoting | PlannedFailoverPhase::Completed => true,
        PlannedFailoverPhase::Admitting
        | PlannedFailoverPhase::Deferred
        | PlannedFailoverPhase::Draining
        | PlannedFailoverPhase::Rejected => false,
    };
    let from = memory
        .last_failover
        .as_ref()
        .filter(|last| promoted && last.to == planned.target)
        .map(|last| last.from.clone())
        .unwrap_or_else(|| memory.active_site.clone());
    let terminal = match planned.phase {
        PlannedFailoverPhase::Completed | PlannedFailoverPhase::Rejected => true,
        PlannedFailoverPhase::Admitting
        | PlannedFailoverPhase::Deferred
        | PlannedFailoverPhase::Draining
        | PlannedFailoverPhase::Promoting => false,
    };
    PlannedFailover {
        target: planned.target.clone(),
        from,
        phase: planned.phase,
        admission: planned.admission.clone(),
        requested_at,
        // The phase start is not persisted; the request time is the conservative bound.
        phase_since: requested_at,
        // Volatile in core: after a restart it is re-confirmed by a later poll.
        fenced_at: None,
        annotation_cleared: terminal
            && annotations.planned_failover.as_deref() != Some(planned.target.as_str()),
    }
}

/// The status to write for `memory` after a poll at `now` (`observed_generation` is the
/// group's `metadata.generation`). Conditions keep their transition time while unchanged.
pub fn status_from(
    spec: &MysqlFailoverGroupSpec,
    memory: &GroupMemory,
    previous: Option<&MysqlFailoverGroupStatus>,
    observed_generation: Option<i64>,
    now: Timestamp,
) -> MysqlFailoverGroupStatus {
    let authority = match &memory.authority {
        AuthorityValidity::Valid => AuthorityStatus {
            state: AuthorityState::Valid,
            reason: None,
        },
        AuthorityValidity::Invalid(reason) => AuthorityStatus {
            state: AuthorityState::Invalid,
            reason: Some(reason.as_str().to_string()),
        },
    };
    let sites: Vec<SiteStatus> = memory
        .sites
        .iter()
        .map(|site| SiteStatus {
            name: site.site.clone(),
            role: Some(site.role.as_str().to_string()),
            last_seen: site.last_seen,
            reachable: site.reachable,
            writable: site.writable,
            fenced: site.fenced,
            gtid_executed: site.gtid_executed.as_ref().map(ToString::to_string),
            replicating: site.replicating,
            source_host: site.source_host.clone(),
            seconds_behind_source: site.seconds_behind_source,
            healthy: site.healthy,
            consecutive_failures: site.consecutive_failures,
            errant_gtid_set: site
                .errant
                .as_ref()
                .filter(|errant| !errant.is_empty())
                .map(ToString::to_string),
        })
        .collect();
    let degraded: Vec<&str> = memory
        .sites
        .iter()
        .filter(|site| site.detection == Detection::Failed || !site.reachable)
        .map(|site| site.site.as_str())
        .collect();
    let ready = Condition {
        type_: CONDITION_READY.to_string(),
        status: if memory.authority.is_valid() {
            "True"
        } else {
            "False"
        }
        .to_string(),
        reason: match &memory.authority {
            AuthorityValidity::Valid => "AuthorityValid".to_string(),
            AuthorityValidity::Invalid(reason) => reason.as_str().to_string(),
        },
        message: format!(
            "active site {} at topology generation {}",
            memory.active_site, memory.topology_generation
        ),
        last_transition_time: None,
    };
    let degraded = Condition {
        type_: CONDITION_DEGRADED.to_string(),
        status: if degraded.is_empty() { "False" } else { "True" }.to_string(),
        reason: if degraded.is_empty() {
            "AllSitesReachable"
        } else {
            "SitesUnreachable"
        }
        .to_string(),
        message: if degraded.is_empty() {
            String::new()
        } else {
            format!("unreachable or failed: {}", degraded.join(", "))
        },
        last_transition_time: None,
    };
    let conditions = [ready, degraded]
        .into_iter()
        .map(|mut condition| {
            let before = previous.and_then(|status| {
                status
                    .conditions
                    .iter()
                    .find(|c| c.type_ == condition.type_)
            });
            condition.last_transition_time = match before {
                Some(before) if before.status == condition.status => {
                    before.last_transition_time.or(Some(now))
                }
                Some(_) | None => Some(now),
            };
            condition
        })
        .collect();
    let replication_lag_seconds = memory
        .sites
        .iter()
        .filter(|site| site.replicating && spec.site(&site.site).is_some())
        .filter_map(|site| site.seconds_behind_source)
        .max();
    MysqlFailoverGroupStatus {
        active_site: Some(memory.active_site.clone()),
        topology_generation: memory.topology_generation,
        authority: Some(authority),
        conditions,
        sites,
        cooldown_until: memory.cooldown_until,
        planned_failover: memory
            .planned_failover
            .as_ref()
            .map(|planned| PlannedFailoverStatus {
                phase: planned.phase,
                target: planned.target.clone(),
                admission: planned.admission.clone(),
                requested_at: Some(planned.requested_at),
            }),
        last_failover: memory.last_failover.clone(),
        health: Some(HealthStatus {
            replication_lag_seconds,
        }),
        observed_generation,
    }
}

/// Whether `role` of a spec site is read-write (the only sites a taint ever lands on).
pub fn is_read_write(spec: &MysqlFailoverGroupSpec, site: &str) -> bool {
    spec.site(site)
        .is_some_and(|site| site.role == SiteRole::ReadWrite)
}

/// The engine's GTID flavor for the CRD flavor.
pub fn mysql_flavor(flavor: Flavor) -> bloodraven_mysql::Flavor {
    match flavor {
        Flavor::Mariadb => bloodraven_mysql::Flavor::MariaDb,
        Flavor::Mysql => bloodraven_mysql::Flavor::MySql,
    }
}

fn pod_role(text: &str) -> PodRole {
    match text {
        names::ROLE_PRIMARY => PodRole::Primary,
        names::ROLE_FENCED => PodRole::Fenced,
        _ => PodRole::Replica,
    }
}

fn invalid_reason(text: &str) -> Option<InvalidReason> {
    [
        InvalidReason::NotIssued,
        InvalidReason::ActiveUnreachable,
        InvalidReason::ActiveMysqlDown,
        InvalidReason::ActiveNotWritable,
        InvalidReason::ActiveLeaseNotHeld,
        InvalidReason::ActiveAuthorityMismatch,
        InvalidReason::Moving,
    ]
    .into_iter()
    .find(|reason| reason.as_str() == text)
}
