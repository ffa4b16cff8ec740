//! `stable` / `unstableReason` of `GET /deploy/v1/groups/{group}` and the lease API's
//! [`Stability`], judged from the group's status (pure; seed 003 "Two leases, in one order").
//!
//! `stable` is false during any operation phase (a planned failover in any non-final phase,
//! Deferred included: its automation hold stands, `AutomaticFailoverHeld`), whenever the
//! group is `SplitBrain` (two writable sites), `NoPrimary` (invalid authority),
//! `RecoveryPending` (an authority move in flight), `Degraded` (a site unreachable or failed),
//! or replication is not running on a replica (`ReplicationNotRunning`). Lag alone never
//! makes it false: the caller reads `health.replicationLagSeconds` and decides.

use std::time::Duration;

use bloodraven_api::{AuthorityState, MysqlFailoverGroupStatus, PlannedFailoverPhase};
use bloodraven_core::deploy::Stability;

use crate::memory::CONDITION_DEGRADED;

/// Why a group is not stable (the `unstableReason` strings).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnstableReason {
    /// More than one site is writable.
    SplitBrain,
    /// An authority move (failover) is in flight.
    RecoveryPending,
    /// No confirmed writable active site.
    NoPrimary,
    /// A planned failover is in a non-final phase (Deferred included).
    AutomaticFailoverHeld,
    /// A site is unreachable or failed.
    Degraded,
    /// A replica's replication threads are not running.
    ReplicationNotRunning,
}

impl UnstableReason {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            UnstableReason::SplitBrain => "SplitBrain",
            UnstableReason::RecoveryPending => "RecoveryPending",
            UnstableReason::NoPrimary => "NoPrimary",
            UnstableReason::AutomaticFailoverHeld => "AutomaticFailoverHeld",
            UnstableReason::Degraded => "Degraded",
            UnstableReason::ReplicationNotRunning => "ReplicationNotRunning",
        }
    }
}

/// The assessment of a group's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Assessment {
    /// `None`: stable.
    pub unstable: Option<UnstableReason>,
    /// Whether leases may be granted and renewed now (423 otherwise).
    pub stability: Stability,
}

/// Assesses `status` (a group never polled has none: `NoPrimary`); `retry_after` is what a
/// 423 suggests (the poll interval: the next chance for the state to change).
pub fn assess(status: Option<&MysqlFailoverGroupStatus>, retry_after: Duration) -> Assessment {
    let between = Stability::BetweenConfirmedStates { retry_after };
    let Some(status) = status else {
        return Assessment {
            unstable: Some(UnstableReason::NoPrimary),
            stability: between,
        };
    };
    let writable = status
        .sites
        .iter()
        .filter(|site| site.writable && site.reachable)
        .count();
    if writable > 1 {
        return Assessment {
            unstable: Some(UnstableReason::SplitBrain),
            stability: between,
        };
    }
    let authority = status.authority.as_ref();
    if authority.is_none_or(|authority| authority.state != AuthorityState::Valid) {
        let moving = authority.and_then(|authority| authority.reason.as_deref()) == Some("Moving");
        return Assessment {
            unstable: Some(if moving {
                UnstableReason::RecoveryPending
            } else {
                UnstableReason::NoPrimary
            }),
            stability: between,
        };
    }
    if let Some(planned) = &status.planned_failover {
        let (in_flight, between_states) = match planned.phase {
            PlannedFailoverPhase::Admitting | PlannedFailoverPhase::Deferred => (true, false),
            PlannedFailoverPhase::Draining | PlannedFailoverPhase::Promoting => (true, true),
            PlannedFailoverPhase::Completed | PlannedFailoverPhase::Rejected => (false, false),
        };
        if in_flight {
            return Assessment {
                unstable: Some(UnstableReason::AutomaticFailoverHeld),
                stability: if between_states {
                    between
                } else {
                    Stability::Confirmed
                },
            };
        }
    }
    let degraded = status
        .conditions
        .iter()
        .any(|condition| condition.type_ == CONDITION_DEGRADED && condition.status == "True")
        || status.sites.iter().any(|site| !site.reachable);
    if degraded {
        return Assessment {
            unstable: Some(UnstableReason::Degraded),
            stability: Stability::Confirmed,
        };
    }
    let active = status.active_site.as_deref();
    let not_replicating = status
        .sites
        .iter()
        .any(|site| Some(site.name.as_str()) != active && !site.replicating);
    Assessment {
        unstable: not_replicating.then_some(UnstableReason::ReplicationNotRunning),
        stability: Stability::Confirmed,
    }
}

#[cfg(test)]
mod tests {
    use bloodraven_api::{AuthorityStatus, Condition, PlannedFailoverStatus, SiteStatus};

    use super::*;

    const RETRY: Duration = Duration::from_secs(2);

    fn site(name: &str, writable: bool, replicating: bool) -> SiteStatus {
        SiteStatus {
            name: name.into(),
            reachable: true,
            writable,
            replicating,
            ..SiteStatus::default()
        }
    }

    fn healthy() -> MysqlFailoverGroupStatus {
        MysqlFailoverGroupStatus {
            active_site: Some("iad".into()),
            topology_generation: 17,
            authority: Some(AuthorityStatus {
                state: AuthorityState::Valid,
                reason: None,
            }),
            sites: vec![
                site("iad", true, false),
                site("pdx", false, true),
                site("reader", false, true),
            ],
            ..MysqlFailoverGroupStatus::default()
        }
    }

    fn planned(phase: PlannedFailoverPhase) -> Option<PlannedFailoverStatus> {
        Some(PlannedFailoverStatus {
            phase,
            target: "pdx".into(),
            admission: Default::default(),
            requested_at: None,
        })
    }

    /// Seed 003: a healthy group is stable; lag alone never makes it unstable.
    #[test]
    fn seed_003_healthy_group_is_stable_whatever_the_lag() {
        let mut status = healthy();
        status.sites[1].seconds_behind_source = Some(3_000);
        let assessment = assess(Some(&status), RETRY);
        assert_eq!(assessment.unstable, None);
        assert_eq!(assessment.stability, Stability::Confirmed);
    }

    /// Seed 003: stable is false during any operation phase, Deferred included
    /// (AutomaticFailoverHeld); grants and renewals are refused (423) only between confirmed
    /// states.
    #[test]
    fn seed_003_planned_failover_phases_are_unstable() {
        for phase in [
            PlannedFailoverPhase::Admitting,
            PlannedFailoverPhase::Deferred,
        ] {
            let mut status = healthy();
            status.planned_failover = planned(phase);
            let assessment = assess(Some(&status), RETRY);
            assert_eq!(
                assessment.unstable,
                Some(UnstableReason::AutomaticFailoverHeld),
                "{phase:?}"
            );
            assert_eq!(assessment.stability, Stability::Confirmed, "{phase:?}");
        }
        for phase in [
            PlannedFailoverPhase::Draining,
            PlannedFailoverPhase::Promoting,
        ] {
            let mut status = healthy();
            status.planned_failover = planned(phase);
            let assessment = assess(Some(&status), RETRY);
            assert_eq!(
                assessment.unstable,
                Some(UnstableReason::AutomaticFailoverHeld)
            );
            assert_eq!(
                assessment.stability,
                Stability::BetweenConfirmedStates { retry_after: RETRY }
            );
        }
        for phase in [
            PlannedFailoverPhase::Completed,
            PlannedFailoverPhase::Rejected,
        ] {
            let mut status = healthy();
            status.planned_failover = planned(phase);
            assert_eq!(assess(Some(&status), RETRY).unstable, None, "{phase:?}");
        }
    }

    /// Seed 003: SplitBrain, NoPrimary, recovery pending, Degraded and replication not
    /// running make stable false.
    #[test]
    fn seed_003_unstable_reasons() {
        let mut split = healthy();
        split.sites[1].writable = true;
        assert_eq!(
            assess(Some(&split), RETRY).unstable,
            Some(UnstableReason::SplitBrain)
        );

        let mut no_primary = healthy();
        no_primary.authority = Some(AuthorityStatus {
            state: AuthorityState::Invalid,
            reason: Some("ActiveUnreachable".into()),
        });
        let assessment = assess(Some(&no_primary), RETRY);
        assert_eq!(assessment.unstable, Some(UnstableReason::NoPrimary));
        assert_eq!(
            assessment.stability,
            Stability::BetweenConfirmedStates { retry_after: RETRY }
        );
        assert_eq!(
            assess(None, RETRY).unstable,
            Some(UnstableReason::NoPrimary)
        );

        let mut moving = no_primary.clone();
        moving.authority = Some(AuthorityStatus {
            state: AuthorityState::Invalid,
            reason: Some("Moving".into()),
        });
        assert_eq!(
            assess(Some(&moving), RETRY).unstable,
            Some(UnstableReason::RecoveryPending)
        );

        let mut degraded = healthy();
        degraded.conditions.push(Condition {
            type_: CONDITION_DEGRADED.into(),
            status: "True".into(),
            reason: "SitesUnreachable".into(),
            message: String::new(),
            last_transition_time: None,
        });
        assert_eq!(
            assess(Some(&degraded), RETRY).unstable,
            Some(UnstableReason::Degraded)
        );

        let mut stopped = healthy();
        stopped.sites[2].replicating = false;
        assert_eq!(
            assess(Some(&stopped), RETRY).unstable,
            Some(UnstableReason::ReplicationNotRunning)
        );
    }
}
