//! `stable` / `unstableReason` of the deploy API's `GET /deploy/v1/groups/{group}`, as a pure
//! function of [`GroupMemory`] (docs/design/requirements.md R003.8-R003.9).
//!
//! docs/design/requirements.md R003.9: "`stable` is false during any operation phase (a planned
//! failover waiting in `Deferred` included); while a planned failover's automation hold still
//! stands (`unstableReason: AutomaticFailoverHeld`); whenever the group is `Degraded`,
//! `SplitBrain` or `NoPrimary`; while recovery is pending; and while replication is not
//! running. Lag alone never makes it false." Lag is never read here: the caller reads
//! `health.replicationLagSeconds`.

use std::time::Duration;

use bloodraven_api::PlannedFailoverPhase;

use super::gate::deferrable_disruption_in_flight;
use super::memory::{Detection, GroupMemory, SiteMemory, SiteState};
use crate::deploy::Stability;

/// Why a group is not stable (the `unstableReason` strings of docs/design/requirements.md R003.9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnstableReason {
    /// More than one site was read writable in the last poll.
    SplitBrain,
    /// A planned failover is in a non-final phase (`Admitting`, `Deferred`, `Draining`,
    /// `Promoting`): its automation hold stands.
    AutomaticFailoverHeld,
    /// An ordered update is in a non-final phase (docs/design/requirements.md R003.9: "any
    /// operation phase").
    OrderedUpdateInProgress,
    /// An emergency failover is in flight, or a promotion was issued and the new active site
    /// is not yet confirmed writable.
    RecoveryPending,
    /// No confirmed writable active site (authority invalid) and no failover in flight.
    NoPrimary,
    /// A site is unreachable or failed, or a former primary is kept fenced.
    Degraded,
    /// A serving replica's replication is not running.
    ReplicationNotRunning,
}

impl UnstableReason {
    /// The wire string (`unstableReason`, and the `Stable` condition's reason).
    pub fn as_str(self) -> &'static str {
        match self {
            UnstableReason::SplitBrain => "SplitBrain",
            UnstableReason::AutomaticFailoverHeld => "AutomaticFailoverHeld",
            UnstableReason::OrderedUpdateInProgress => "OrderedUpdateInProgress",
            UnstableReason::RecoveryPending => "RecoveryPending",
            UnstableReason::NoPrimary => "NoPrimary",
            UnstableReason::Degraded => "Degraded",
            UnstableReason::ReplicationNotRunning => "ReplicationNotRunning",
        }
    }
}

/// `None` when the group is stable, else the first reason that holds, in this order:
/// `SplitBrain`, `AutomaticFailoverHeld`, `RecoveryPending`, `OrderedUpdateInProgress`,
/// `NoPrimary`, `Degraded`,
/// `ReplicationNotRunning`. Replication lag alone never makes a group unstable.
pub fn unstable_reason(memory: &GroupMemory) -> Option<UnstableReason> {
    if writable_sites(memory).len() > 1 {
        return Some(UnstableReason::SplitBrain);
    }
    if planned_in_flight(memory).is_some() {
        return Some(UnstableReason::AutomaticFailoverHeld);
    }
    if recovery_pending(memory) {
        return Some(UnstableReason::RecoveryPending);
    }
    if memory
        .ordered_update
        .as_ref()
        .is_some_and(|update| update.in_flight())
    {
        return Some(UnstableReason::OrderedUpdateInProgress);
    }
    if !memory.authority.is_valid() {
        return Some(UnstableReason::NoPrimary);
    }
    if !degraded_sites(memory).is_empty() {
        return Some(UnstableReason::Degraded);
    }
    if !not_replicating_sites(memory).is_empty() {
        return Some(UnstableReason::ReplicationNotRunning);
    }
    None
}

/// Whether deploy leases may be granted and renewed now (docs/design/requirements.md R003.13:
/// between confirmed states a renewal answers `423 unstable` with `retryAfterSeconds`, and no
/// deadline moves).
///
/// Between confirmed states: split brain, an emergency failover or unconfirmed promotion,
/// no confirmed writable active site, or a planned failover in `Draining`/`Promoting`. A
/// planned failover still `Admitting` or `Deferred`, a degraded site or stopped replication
/// make the group unstable but leave the topology confirmed: a pipeline may still take and
/// renew its leases (it needs them to hold the switchover off).
pub fn lease_stability(memory: &GroupMemory, retry_after: Duration) -> Stability {
    let between = writable_sites(memory).len() > 1
        || recovery_pending(memory)
        || !memory.authority.is_valid()
        || deferrable_disruption_in_flight(memory);
    if between {
        Stability::BetweenConfirmedStates { retry_after }
    } else {
        Stability::Confirmed
    }
}

/// Sites read writable (and reachable) in the last poll.
pub(super) fn writable_sites(memory: &GroupMemory) -> Vec<&str> {
    memory
        .sites
        .iter()
        .filter(|site| site.reachable && site.writable)
        .map(|site| site.site.as_str())
        .collect()
}

/// The phase of a planned failover in a non-final phase.
pub(super) fn planned_in_flight(memory: &GroupMemory) -> Option<PlannedFailoverPhase> {
    let phase = memory.planned_failover.as_ref()?.phase;
    match phase {
        PlannedFailoverPhase::Admitting
        | PlannedFailoverPhase::Deferred
        | PlannedFailoverPhase::Draining
        | PlannedFailoverPhase::Promoting => Some(phase),
        PlannedFailoverPhase::Completed | PlannedFailoverPhase::Rejected => None,
    }
}

/// An emergency failover is in flight, or the last promotion is not confirmed yet.
pub(super) fn recovery_pending(memory: &GroupMemory) -> bool {
    memory.emergency_failover.is_some()
        || memory
            .last_failover
            .as_ref()
            .is_some_and(|failover| failover.completed_at.is_none())
}

/// Sites unreachable in the last poll or detected failed, and former primaries kept fenced.
pub(super) fn degraded_sites(memory: &GroupMemory) -> Vec<&SiteMemory> {
    memory
        .sites
        .iter()
        .filter(|site| {
            let failed = match site.detection {
                Detection::Failed => true,
                Detection::Up | Detection::Suspect => false,
            };
            let fenced = match site.state {
                SiteState::Demoted => true,
                SiteState::Active | SiteState::Replica => false,
            };
            !site.reachable || failed || fenced
        })
        .collect()
}

/// Reachable serving replicas whose replication is not running.
pub(super) fn not_replicating_sites(memory: &GroupMemory) -> Vec<&str> {
    memory
        .sites
        .iter()
        .filter(|site| {
            let serving_replica = match site.state {
                SiteState::Replica => site.site != memory.active_site,
                SiteState::Active | SiteState::Demoted => false,
            };
            serving_replica && site.reachable && !site.replicating
        })
        .map(|site| site.site.as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::memory::{
        AuthorityValidity, EmergencyFailover, EmergencyPhase, InvalidReason,
    };
    use crate::engine::PlannedFailover;
    use crate::time::Timestamp;
    use bloodraven_api::{Admission, FailoverKind, LastFailover, MysqlFailoverGroupSpec};

    const RETRY: Duration = Duration::from_secs(2);

    fn spec() -> MysqlFailoverGroupSpec {
        serde_json::from_str(
            r#"{"flavor": "mariadb", "image": "mariadb:10.11", "initialActiveSite": "iad",
                "sites": [{"name": "iad", "role": "read-write"},
                          {"name": "pdx", "role": "read-write"},
                          {"name": "reader", "role": "read-only"}]}"#,
        )
        .expect("spec parses")
    }

    /// iad writable and valid, pdx and reader replicating, every site reachable.
    fn healthy() -> GroupMemory {
        let mut memory = GroupMemory::initial(&spec());
        memory.topology_generation = 1;
        memory.authority = AuthorityValidity::Valid;
        for site in &mut memory.sites {
            site.reachable = true;
            site.writable = site.site == "iad";
            site.replicating = site.site != "iad";
            site.seconds_behind_source = Some(0);
        }
        memory
    }

    fn planned(phase: PlannedFailoverPhase) -> PlannedFailover {
        PlannedFailover {
            target: "pdx".to_string(),
            from: "iad".to_string(),
            phase,
            admission: Admission::default(),
            requested_at: Timestamp(0),
            phase_since: Timestamp(0),
            fenced_at: None,
            annotation_cleared: false,
        }
    }

    #[test]
    fn seed_003_healthy_group_is_stable_and_lag_alone_never_makes_it_unstable() {
        let mut memory = healthy();
        assert_eq!(unstable_reason(&memory), None);
        for site in &mut memory.sites {
            site.seconds_behind_source = Some(86_400);
        }
        assert_eq!(unstable_reason(&memory), None, "lag is the caller's policy");
        assert_eq!(lease_stability(&memory, RETRY), Stability::Confirmed);
    }

    #[test]
    fn seed_003_any_planned_phase_including_deferred_holds_automatic_failover() {
        for phase in [
            PlannedFailoverPhase::Admitting,
            PlannedFailoverPhase::Deferred,
            PlannedFailoverPhase::Draining,
            PlannedFailoverPhase::Promoting,
        ] {
            let mut memory = healthy();
            memory.planned_failover = Some(planned(phase));
            assert_eq!(
                unstable_reason(&memory),
                Some(UnstableReason::AutomaticFailoverHeld),
                "{phase:?}"
            );
        }
        for phase in [
            PlannedFailoverPhase::Completed,
            PlannedFailoverPhase::Rejected,
        ] {
            let mut memory = healthy();
            memory.planned_failover = Some(planned(phase));
            assert_eq!(unstable_reason(&memory), None, "{phase:?}");
        }
    }

    #[test]
    fn seed_003_split_brain_no_primary_recovery_degraded_and_stopped_replication() {
        let mut split = healthy();
        split.sites[1].writable = true;
        assert_eq!(unstable_reason(&split), Some(UnstableReason::SplitBrain));

        let mut no_primary = healthy();
        no_primary.authority = AuthorityValidity::Invalid(InvalidReason::ActiveNotWritable);
        assert_eq!(
            unstable_reason(&no_primary),
            Some(UnstableReason::NoPrimary)
        );

        let mut emergency = healthy();
        emergency.authority = AuthorityValidity::Invalid(InvalidReason::Moving);
        emergency.emergency_failover = Some(EmergencyFailover {
            from: "iad".to_string(),
            phase: EmergencyPhase::AwaitingLeaseExpiry,
            announced_at: Timestamp(0),
            started_at: Timestamp(0),
            detected_at: Timestamp(0),
            fenced_at: None,
            holder_unknown: false,
        });
        assert_eq!(
            unstable_reason(&emergency),
            Some(UnstableReason::RecoveryPending)
        );

        let mut unconfirmed = healthy();
        unconfirmed.last_failover = Some(LastFailover {
            kind: FailoverKind::Emergency,
            from: "iad".to_string(),
            to: "pdx".to_string(),
            started_at: None,
            detected_at: None,
            fenced_at: None,
            promoted_at: Some(Timestamp(0)),
            completed_at: None,
            lost_transactions: 0,
            lost_gtid_set: None,
            exact: false,
        });
        assert_eq!(
            unstable_reason(&unconfirmed),
            Some(UnstableReason::RecoveryPending)
        );

        let mut unreachable = healthy();
        unreachable.sites[2].reachable = false;
        assert_eq!(
            unstable_reason(&unreachable),
            Some(UnstableReason::Degraded)
        );

        let mut fenced = healthy();
        fenced.sites[1].state = SiteState::Demoted;
        fenced.sites[1].replicating = false;
        assert_eq!(unstable_reason(&fenced), Some(UnstableReason::Degraded));

        let mut stopped = healthy();
        stopped.sites[2].replicating = false;
        assert_eq!(
            unstable_reason(&stopped),
            Some(UnstableReason::ReplicationNotRunning)
        );
    }

    #[test]
    fn seed_003_leases_answer_423_only_between_confirmed_states() {
        let between = Stability::BetweenConfirmedStates { retry_after: RETRY };
        let mut deferred = healthy();
        deferred.planned_failover = Some(planned(PlannedFailoverPhase::Deferred));
        assert_eq!(
            lease_stability(&deferred, RETRY),
            Stability::Confirmed,
            "a deferred switchover leaves the topology confirmed: the hold must stay renewable"
        );
        let mut draining = healthy();
        draining.planned_failover = Some(planned(PlannedFailoverPhase::Draining));
        assert_eq!(lease_stability(&draining, RETRY), between);
        let mut invalid = healthy();
        invalid.authority = AuthorityValidity::Invalid(InvalidReason::ActiveUnreachable);
        assert_eq!(lease_stability(&invalid, RETRY), between);
        let mut stopped = healthy();
        stopped.sites[2].replicating = false;
        assert_eq!(lease_stability(&stopped, RETRY), Stability::Confirmed);
    }
}
