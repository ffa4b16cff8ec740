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
