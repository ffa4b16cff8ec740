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
    SiteStatus, Timestamp,
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

#[cfg(test)]
mod tests {
    use bloodraven_api::{Admission, DeferReason, FailoverKind, LastFailover};
    use bloodraven_core::engine::SiteState;

    use super::*;

    fn spec() -> MysqlFailoverGroupSpec {
        serde_yaml::from_str(
            "image: mariadb:10.11\nsites:\n- {name: iad, role: read-write}\n- {name: pdx, role: read-write}\n- {name: reader, role: read-only}\ninitialActiveSite: iad\nfailoverCooldown: 30s\n",
        )
        .expect("spec")
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_unix_millis(1_796_000_000_000 + seconds * 1_000)
    }

    /// A memory after an emergency failover iad -> pdx: iad demoted (fenced), cooldown set.
    fn after_failover() -> GroupMemory {
        let spec = spec();
        let flavor = mysql_flavor(spec.flavor);
        let mut memory = GroupMemory::initial(&spec);
        memory.active_site = "pdx".into();
        memory.topology_generation = 3;
        memory.authority = AuthorityValidity::Valid;
        memory.cooldown_until = Some(at(30));
        memory.last_failover = Some(LastFailover {
            kind: FailoverKind::Emergency,
            from: "iad".into(),
            to: "pdx".into(),
            started_at: Some(at(-8)),
            detected_at: Some(at(-2)),
            fenced_at: Some(at(-1)),
            promoted_at: Some(at(0)),
            completed_at: Some(at(1)),
            lost_transactions: 2,
            lost_gtid_set: Some("0-1-41-42".into()),
            exact: false,
        });
        for site in &mut memory.sites {
            site.last_seen = Some(at(1));
            site.reachable = site.site != "iad";
            site.gtid_executed = GtidSet::parse(flavor, "0-1-40").ok();
            match site.site.as_str() {
                "iad" => {
                    site.state = SiteState::Demoted;
                    site.role = PodRole::Fenced;
                    site.consecutive_failures = 5;
                    site.detection = Detection::Suspect;
                    site.errant = GtidSet::parse(flavor, "0-1-42").ok();
                }
                "pdx" => {
                    site.state = SiteState::Active;
                    site.role = PodRole::Primary;
                    site.writable = true;
                    site.healthy = true;
                }
                _ => {
                    site.state = SiteState::Replica;
                    site.role = PodRole::Replica;
                    site.replicating = true;
                    site.healthy = true;
                    site.seconds_behind_source = Some(4);
                    site.source_host = Some("mysql-g-pdx.ns.svc.cluster.local".into());
                }
            }
        }
        memory
    }

    fn annotations(cooldown: Option<Timestamp>) -> GroupAnnotations {
        GroupAnnotations {
            cooldown_until: cooldown,
            ..GroupAnnotations::default()
        }
    }

    /// bloodraven.md: status carries activeSite, topologyGeneration, authority, sites[],
    /// cooldownUntil, lastFailover; loading it back gives the same memory, except what core
    /// marks volatile (authority_issued_at re-stamped at load).
    #[test]
    fn memory_round_trips_through_status() {
        let spec = spec();
        let memory = after_failover();
        let status = status_from(&spec, &memory, None, Some(4), at(2));
        assert_eq!(status.active_site.as_deref(), Some("pdx"));
        assert_eq!(status.topology_generation, 3);
        assert_eq!(
            status.authority.as_ref().map(|a| a.state),
            Some(AuthorityState::Valid)
        );
        assert_eq!(status.observed_generation, Some(4));
        assert_eq!(
            status
                .health
                .as_ref()
                .and_then(|h| h.replication_lag_seconds),
            Some(4)
        );
        let iad = status.sites.iter().find(|s| s.name == "iad").expect("iad");
        assert_eq!(iad.role.as_deref(), Some("fenced"));
        assert_eq!(iad.errant_gtid_set.as_deref(), Some("0-1-42"));

        let loaded = memory_from(&spec, Some(&status), &annotations(Some(at(30))), at(5));
        let mut expected = memory.clone();
        expected.authority_issued_at = Some(at(5));
        assert_eq!(loaded, expected);
    }

    /// Seed 001: the cooldown is persisted twice; losing either copy alone keeps it.
    #[test]
    fn seed_001_losing_one_cooldown_copy_keeps_the_cooldown() {
        let spec = spec();
        let memory = after_failover();
        let mut status = status_from(&spec, &memory, None, None, at(2));

        // Annotation lost, status copy kept.
        let loaded = memory_from(&spec, Some(&status), &annotations(None), at(5));
        assert_eq!(loaded.cooldown_until, Some(at(30)));

        // Status copy lost (e.g. a status rewrite), annotation kept.
        status.cooldown_until = None;
        let loaded = memory_from(&spec, Some(&status), &annotations(Some(at(30))), at(5));
        assert_eq!(loaded.cooldown_until, Some(at(30)));

        // No status at all (object recreated): the annotation alone still restores it.
        let loaded = memory_from(&spec, None, &annotations(Some(at(30))), at(5));
        assert_eq!(loaded.cooldown_until, Some(at(30)));

        // Both copies present and different: the later is in force.
        status.cooldown_until = Some(at(45));
        let loaded = memory_from(&spec, Some(&status), &annotations(Some(at(30))), at(5));
        assert_eq!(loaded.cooldown_until, Some(at(45)));

        // Both lost: CooldownViolated(restart+stateLost) is possible, by construction.
        status.cooldown_until = None;
        let loaded = memory_from(&spec, Some(&status), &annotations(None), at(5));
        assert_eq!(loaded.cooldown_until, None);
    }

    /// A restart re-times detection: a site suspect before the restart is suspect after it
    /// (never failed early), and the streak start is forgotten.
    #[test]
    fn detection_restarts_its_streak_after_a_load() {
        let spec = spec();
        let mut memory = after_failover();
        if let Some(site) = memory.site_mut("iad") {
            site.detection = Detection::Failed;
            site.failing_since = Some(at(-8));
            site.failed_at = Some(at(-2));
        }
        let status = status_from(&spec, &memory, None, None, at(2));
        let loaded = memory_from(&spec, Some(&status), &GroupAnnotations::default(), at(5));
        let iad = loaded.site("iad").expect("iad");
        assert_eq!(iad.detection, Detection::Suspect);
        assert_eq!((iad.failing_since, iad.failed_at), (None, None));
        assert_eq!(iad.consecutive_failures, 5);
    }

    /// Seed 003: a Deferred planned failover keeps its admission (deferReason, retryTime,
    /// message); a finished request whose annotation is still present is not a new one.
    #[test]
    fn planned_failover_round_trips_with_admission() {
        let spec = spec();
        let mut memory = GroupMemory::initial(&spec);
        memory.topology_generation = 1;
        memory.planned_failover = Some(PlannedFailover {
            target: "pdx".into(),
            from: "iad".into(),
            phase: PlannedFailoverPhase::Deferred,
            admission: Admission {
                defer_reason: Some(DeferReason::DeploymentHold),
                retry_time: Some(at(20)),
                message: Some("held by a1 (counter-app)".into()),
            },
            requested_at: at(1),
            phase_since: at(1),
            fenced_at: None,
            annotation_cleared: false,
        });
        let status = status_from(&spec, &memory, None, None, at(2));
        let with_request = GroupAnnotations {
            planned_failover: Some("pdx".into()),
            ..GroupAnnotations::default()
        };
        let loaded = memory_from(&spec, Some(&status), &with_request, at(5));
        assert_eq!(loaded.planned_failover, memory.planned_failover);

        let mut completed = status.clone();
        if let Some(planned) = completed.planned_failover.as_mut() {
            planned.phase = PlannedFailoverPhase::Completed;
        }
        let loaded = memory_from(&spec, Some(&completed), &with_request, at(5));
        assert_eq!(
            loaded.planned_failover.map(|p| p.annotation_cleared),
            Some(false)
        );
        let loaded = memory_from(&spec, Some(&completed), &GroupAnnotations::default(), at(5));
        assert_eq!(
            loaded.planned_failover.map(|p| p.annotation_cleared),
            Some(true)
        );
    }

    #[test]
    fn annotations_are_read_from_the_group() {
        let mut group = MysqlFailoverGroup::new("g", spec());
        group.metadata.annotations = Some(
            [
                (
                    names::ANNOTATION_PLANNED_FAILOVER.to_string(),
                    " pdx ".to_string(),
                ),
                (
                    names::ANNOTATION_REVOKE_DEPLOYMENT_LEASES.to_string(),
                    String::new(),
                ),
                (
                    names::ANNOTATION_COOLDOWN_UNTIL.to_string(),
                    at(30).to_string(),
                ),
            ]
            .into_iter()
            .collect(),
        );
        let read = annotations_of(&group);
        assert_eq!(read.planned_failover.as_deref(), Some("pdx"));
        assert!(read.revoke_deployment_leases);
        assert_eq!(read.cooldown_until, Some(at(30)));
        // An unparsable cooldown copy counts as lost, never as "no cooldown forever".
        group.metadata.annotations = Some(
            [(
                names::ANNOTATION_COOLDOWN_UNTIL.to_string(),
                "soon".to_string(),
            )]
            .into_iter()
            .collect(),
        );
        assert_eq!(annotations_of(&group).cooldown_until, None);
    }

    /// Conditions keep their transition time while their status is unchanged.
    #[test]
    fn condition_transition_times_move_only_on_change() {
        let spec = spec();
        let memory = after_failover();
        let first = status_from(&spec, &memory, None, None, at(2));
        let second = status_from(&spec, &memory, Some(&first), None, at(4));
        let ready = |status: &MysqlFailoverGroupStatus| {
            status
                .conditions
                .iter()
                .find(|c| c.type_ == CONDITION_READY)
                .cloned()
                .expect("ready")
        };
        assert_eq!(ready(&second).last_transition_time, Some(at(2)));
        let mut invalid = memory.clone();
        invalid.authority = AuthorityValidity::Invalid(InvalidReason::Moving);
        let third = status_from(&spec, &invalid, Some(&second), None, at(6));
        assert_eq!(ready(&third).status, "False");
        assert_eq!(ready(&third).reason, "Moving");
        assert_eq!(ready(&third).last_transition_time, Some(at(6)));
    }
}
