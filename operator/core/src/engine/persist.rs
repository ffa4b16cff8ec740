//! [`GroupMemory`] to and from the group's status: what the operator shell writes after
//! every poll and reads back after a restart.
//!
//! The *volatile* parts of memory (see [`GroupMemory`]) are not in the status; after a
//! restart they are recovered from the sidecars by `decide` or re-derived conservatively.

use bloodraven_api::{
    AuthorityState, AuthorityStatus, Flavor, HealthStatus, MysqlFailoverGroupSpec,
    MysqlFailoverGroupStatus, PlannedFailoverPhase, PlannedFailoverStatus, SiteStatus,
};
use bloodraven_mysql::GtidSet;

use super::memory::{
    AuthorityValidity, Detection, GroupMemory, InvalidReason, PlannedFailover, PodRole, SiteMemory,
    SiteState,
};
use super::reading::mysql_flavor;
use crate::time::Timestamp;

const INVALID_REASONS: [InvalidReason; 7] = [
    InvalidReason::NotIssued,
    InvalidReason::ActiveUnreachable,
    InvalidReason::ActiveMysqlDown,
    InvalidReason::ActiveNotWritable,
    InvalidReason::ActiveLeaseNotHeld,
    InvalidReason::ActiveAuthorityMismatch,
    InvalidReason::Moving,
];

impl GroupMemory {
    /// The status to write (`status` subresource) for this memory.
    pub fn to_status(&self) -> MysqlFailoverGroupStatus {
        let authority = match &self.authority {
            AuthorityValidity::Valid => AuthorityStatus {
                state: AuthorityState::Valid,
                reason: None,
            },
            AuthorityValidity::Invalid(reason) => AuthorityStatus {
                state: AuthorityState::Invalid,
                reason: Some(reason.as_str().to_string()),
            },
        };
        let replication_lag_seconds = self
            .sites
            .iter()
            .filter(|site| site.replicating)
            .filter_map(|site| site.seconds_behind_source)
            .max();
        MysqlFailoverGroupStatus {
            active_site: Some(self.active_site.clone()),
            topology_generation: self.topology_generation,
            authority: Some(authority),
            conditions: self.conditions.clone(),
            sites: self.sites.iter().map(site_status).collect(),
            cooldown_until: self.cooldown_until,
            planned_failover: self
                .planned_failover
                .as_ref()
                .map(|planned| PlannedFailoverStatus {
                    phase: planned.phase,
                    target: planned.target.clone(),
                    admission: planned.admission.clone(),
                    requested_at: Some(planned.requested_at),
                }),
            ordered_update: self
                .ordered_update
                .as_ref()
                .map(super::update::OrderedUpdate::to_status),
            last_failover: self.last_failover.clone(),
            health: Some(HealthStatus {
                replication_lag_seconds,
            }),
            restore: self.restore.as_ref().map(|restore| restore.status.clone()),
            last_backup: self.last_backup.clone(),
            observed_generation: None,
        }
    }

    /// The memory a restarted operator resumes from, given the persisted status (`None`: no
    /// status at all, e.g. a new group or a lost status). `now` restarts the bounds of the
    /// phases in flight. GTID texts that do not parse are treated as unknown.
    pub fn from_status(
        spec: &MysqlFailoverGroupSpec,
        status: Option<&MysqlFailoverGroupStatus>,
        now: Timestamp,
    ) -> GroupMemory {
        let initial = GroupMemory::initial(spec);
        let Some(status) = status else {
            return initial;
        };
        let Some(active_site) = status.active_site.clone() else {
            return initial;
        };
        if status.topology_generation == 0 || spec.site(&active_site).is_none() {
            return initial;
        }
        let flavor = spec.flavor;
        let authority = match status
            .authority
            .as_ref()
            .map(|a| (a.state, a.reason.as_deref()))
        {
            Some((AuthorityState::Valid, _)) => AuthorityValidity::Valid,
            Some((AuthorityState::Invalid, reason)) => AuthorityValidity::Invalid(
                INVALID_REASONS
                    .into_iter()
                    .find(|known| Some(known.as_str()) == reason)
                    .unwrap_or(InvalidReason::NotIssued),
            ),
            None => AuthorityValidity::Invalid(InvalidReason::NotIssued),
        };
        let restore = status
            .restore
            .clone()
            .map(|restore| super::restore::RestoreMemory::resumed(restore, now));
        // A restore in place fences the active site itself (`role=fenced` on its pod): that
        // site is still the active one, not a demoted site.
        let restore_fenced = restore.as_ref().and_then(|restore| {
            super::restore::restore_holds_fenced(restore, &active_site, status.topology_generation)
        });
        let sites = spec
            .sites
            .iter()
            .map(|site| {
                let persisted = status.sites.iter().find(|s| s.name == site.name);
                let fenced_is_active = restore_fenced == Some(site.name.as_str());
                site_memory(
                    &site.name,
                    &active_site,
                    persisted,
                    flavor,
                    fenced_is_active,
                    now,
                )
            })
            .collect();
        let last_from = status.last_failover.as_ref().map(|f| f.from.clone());
        let planned_failover = status.planned_failover.as_ref().map(|planned| {
            let from = match planned.phase {
                PlannedFailoverPhase::Promoting | PlannedFailoverPhase::Completed => {
                    last_from.clone().unwrap_or_else(|| active_site.clone())
                }
                PlannedFailoverPhase::Admitting
                | PlannedFailoverPhase::Deferred
                | PlannedFailoverPhase::Draining
                | PlannedFailoverPhase::Rejected => active_site.clone(),
            };
            PlannedFailover {
                target: planned.target.clone(),
                from,
                phase: planned.phase,
                admission: planned.admission.clone(),
                requested_at: planned.requested_at.unwrap_or(now),
                phase_since: now,
                fenced_at: None,
                annotation_cleared: false,
            }
        });
        GroupMemory {
            active_site,
            topology_generation: status.topology_generation,
            unadopted_generation: 0,
            authority_issued_at: None,
            authority,
            authority_invalid_since: None,
            sites,
            cooldown_until: status.cooldown_until,
            planned_failover,
            emergency_failover: None,
            ordered_update: status
                .ordered_update
                .as_ref()
                .map(|update| super::update::OrderedUpdate::from_status(update, now)),
            last_failover: status.last_failover.clone(),
            conditions: status.conditions.clone(),
            restore,
            last_backup: status.last_backup.clone(),
        }
    }
}

fn site_status(site: &SiteMemory) -> SiteStatus {
    SiteStatus {
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
        mysqld_started_at: site.mysqld_started_at,
        rejoin: site.rejoin.as_ref().map(|rejoin| rejoin.status.clone()),
    }
}

fn site_memory(
    name: &str,
    active_site: &str,
    persisted: Option<&SiteStatus>,
    flavor: Flavor,
    fenced_is_active: bool,
    now: Timestamp,
) -> SiteMemory {
    let role = match persisted.and_then(|s| s.role.as_deref()) {
        Some(bloodraven_api::names::ROLE_PRIMARY) => PodRole::Primary,
        Some(bloodraven_api::names::ROLE_FENCED) => PodRole::Fenced,
        Some(_) | None => PodRole::Replica,
    };
    // `role=fenced` is decided for a demoted site, the active site included while a planned
    // failover drains it: read back as Active, it would stay Active beside the new active site
    // after the promotion and never rejoin. A restore in place fences the active site too
    // (`fenced_is_active`): that one is still Active.
    let state = match role {
        PodRole::Fenced if fenced_is_active => SiteState::Active,
        PodRole::Fenced => SiteState::Demoted,
        PodRole::Primary | PodRole::Replica if name == active_site => SiteState::Active,
        PodRole::Primary | PodRole::Replica => SiteState::Replica,
    };
    let mut site = SiteMemory::new(name, state);
    let Some(persisted) = persisted else {
        return site;
    };
    let parse = |text: &Option<String>| {
        text.as_deref()
            .and_then(|text| GtidSet::parse(mysql_flavor(flavor), text).ok())
    };
    site.role = role;
    site.consecutive_failures = persisted.consecutive_failures;
    site.detection = if persisted.consecutive_failures == 0 {
        Detection::Up
    } else {
        Detection::Suspect
    };
    site.last_seen = persisted.last_seen;
    site.gtid_executed = parse(&persisted.gtid_executed);
    site.errant = parse(&persisted.errant_gtid_set);
    site.mysqld_started_at = persisted.mysqld_started_at;
    site.reachable = persisted.reachable;
    site.writable = persisted.writable;
    site.fenced = persisted.fenced;
    site.replicating = persisted.replicating;
    site.source_host = persisted.source_host.clone();
    site.seconds_behind_source = persisted.seconds_behind_source;
    site.healthy = persisted.healthy;
    site.rejoin = persisted
        .rejoin
        .clone()
        .map(|rejoin| super::rejoin::RejoinMemory::resumed(rejoin, now));
    site
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloodraven_api::{Admission, FailoverKind, LastFailover};

    fn spec() -> MysqlFailoverGroupSpec {
        serde_json::from_str(
            r#"{"flavor": "mariadb", "image": "mariadb:10.11", "initialActiveSite": "iad",
                "sites": [{"name": "iad", "role": "read-write"},
                          {"name": "pdx", "role": "read-write"},
                          {"name": "reader", "role": "read-only"}]}"#,
        )
        .expect("spec parses")
    }

    #[test]
    fn status_round_trip_keeps_every_persisted_field() {
        let spec = spec();
        let mut memory = GroupMemory::initial(&spec);
        memory.active_site = "pdx".to_string();
        memory.topology_generation = 7;
        memory.authority = AuthorityValidity::Invalid(InvalidReason::ActiveNotWritable);
        memory.cooldown_until = Some(Timestamp(1_000_000));
        for site in &mut memory.sites {
            site.state = match site.site.as_str() {
                "pdx" => SiteState::Active,
                "iad" => SiteState::Demoted,
                _ => SiteState::Replica,
            };
            site.role = match site.state {
                SiteState::Active => PodRole::Replica,
                SiteState::Demoted => PodRole::Fenced,
                SiteState::Replica => PodRole::Replica,
            };
            site.gtid_executed = GtidSet::parse(bloodraven_mysql::Flavor::MariaDb, "0-1-100").ok();
            site.consecutive_failures = 2;
            site.last_seen = Some(Timestamp(900_000));
        }
        memory.sites[0].errant =
            GtidSet::parse(bloodraven_mysql::Flavor::MariaDb, "0-1-101..103").ok();
        let mut rejoin = bloodraven_api::RejoinStatus::requested(
            false,
            Timestamp(750_000),
            "rejoin of iad requested".to_string(),
        );
        rejoin.phase = bloodraven_api::RejoinPhase::Reseeding;
        rejoin.archive = Some("rejoin-iad-750".to_string());
        rejoin.errant_gtid_set = Some("0-1-101..103".to_string());
        rejoin.rejoin_id = Some(750);
        rejoin.archived_at = Some(Timestamp(760_000));
        memory.sites[0].rejoin = Some(super::super::rejoin::RejoinMemory {
            status: rejoin.clone(),
            annotation_cleared: true,
        });
        memory.planned_failover = Some(PlannedFailover {
            target: "iad".to_string(),
            from: "pdx".to_string(),
            phase: PlannedFailoverPhase::Deferred,
            admission: Admission::default(),
            requested_at: Timestamp(800_000),
            phase_since: Timestamp(800_000),
            fenced_at: None,
            annotation_cleared: false,
        });
        memory.last_failover = Some(LastFailover {
            kind: FailoverKind::Emergency,
            from: "iad".to_string(),
            to: "pdx".to_string(),
            started_at: None,
            detected_at: None,
            fenced_at: None,
            promoted_at: Some(Timestamp(700_000)),
            completed_at: None,
            lost_transactions: 3,
            lost_gtid_set: Some("0-1-101..103".to_string()),
            exact: false,
        });
        let status = memory.to_status();
        assert_eq!(
            status.authority.as_ref().unwrap().reason.as_deref(),
            Some("ActiveNotWritable")
        );
        assert_eq!(
            status.sites[0].errant_gtid_set.as_deref(),
            Some("0-1-101..103")
        );
        let json = serde_json::to_string(&status).unwrap();
        let read: MysqlFailoverGroupStatus = serde_json::from_str(&json).unwrap();
        let restored = GroupMemory::from_status(&spec, Some(&read), Timestamp(800_000));
        assert_eq!(restored.active_site, "pdx");
        assert_eq!(restored.topology_generation, 7);
        assert_eq!(restored.authority, memory.authority);
        assert_eq!(restored.cooldown_until, memory.cooldown_until);
        assert_eq!(restored.last_failover, memory.last_failover);
        assert_eq!(restored.planned_failover, memory.planned_failover);
        for (restored, original) in restored.sites.iter().zip(&memory.sites) {
            assert_eq!(restored.state, original.state, "{}", original.site);
            assert_eq!(restored.gtid_executed, original.gtid_executed);
            assert_eq!(restored.errant, original.errant);
            assert_eq!(restored.consecutive_failures, 2);
            assert_eq!(restored.last_seen, original.last_seen);
        }
        // The rejoin resumes in its phase, its phase bound restarted at the restart.
        assert_eq!(
            restored.sites[0].rejoin,
            Some(super::super::rejoin::RejoinMemory {
                status: bloodraven_api::RejoinStatus {
                    phase_since: Some(Timestamp(800_000)),
                    ..rejoin
                },
                annotation_cleared: false,
            })
        );
    }

    #[test]
    fn no_status_or_generation_zero_is_the_initial_memory() {
        let spec = spec();
        assert_eq!(
            GroupMemory::from_status(&spec, None, Timestamp(0)),
            GroupMemory::initial(&spec)
        );
        let status = MysqlFailoverGroupStatus::default();
        assert_eq!(
            GroupMemory::from_status(&spec, Some(&status), Timestamp(0)),
            GroupMemory::initial(&spec)
        );
    }
}
