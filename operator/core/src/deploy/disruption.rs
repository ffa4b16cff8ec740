//! Which planned disruptions a live failover-hold defers, and which paths never read a lease
//! (docs/design/requirements.md R003.16-R003.18).

use crate::time::Timestamp;

/// Every kind of disruption the decision engine can start on a group.
///
/// Only the planned ones consult deployment leases, and only the failover-hold: an unexpired
/// failover-hold defers a planned failover (phase `Deferred`, `admission.deferReason:
/// DeploymentHold`, `admission.retryTime` = the earliest hold expiry), an ordered update and a
/// restore-in-place. A migration lease on its own defers nothing.
///
/// Emergency failover, returning-primary fencing and primary reassertion never consult a
/// lease: if a hold could pause them, a stuck pipeline could keep a dead primary nominally in
/// charge. They are safety paths a deployment cannot buy a delay on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DisruptionKind {
    /// A planned failover (annotation or `kubectl bloodraven promote`). Deferrable.
    PlannedFailover,
    /// An ordered update (image or configuration change). Deferrable.
    OrderedUpdate,
    /// Restore-in-place of the active site from a backup. Deferrable.
    RestoreInPlace,
    /// The rejoin of a fenced returning primary: its archive, then its re-seed from the
    /// active site (`engine::rejoin`). Deferrable.
    Rejoin,
    /// Promotion after the active site failed. Never reads a lease.
    EmergencyFailover,
    /// Keeping a returning old primary fenced. Never reads a lease.
    ReturningPrimaryFencing,
    /// Re-issuing authority to an active site whose mysqld restarted. Never reads a lease.
    PrimaryReassertion,
}

impl DisruptionKind {
    /// Whether this disruption waits behind a live failover-hold (the table of
    /// docs/design/requirements.md R003.18: "Defers until the hold is gone" vs "Never consults
    /// a lease").
    pub const fn consults_deployment_hold(self) -> bool {
        match self {
            DisruptionKind::PlannedFailover
            | DisruptionKind::OrderedUpdate
            | DisruptionKind::RestoreInPlace
            | DisruptionKind::Rejoin => true,
            DisruptionKind::EmergencyFailover
            | DisruptionKind::ReturningPrimaryFencing
            | DisruptionKind::PrimaryReassertion => false,
        }
    }
}

/// A live failover-hold that defers planned disruption: what a `Deferred` planned failover
/// reports in `admission.retryTime` and its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HoldInfo {
    /// The earliest expiry among live holds; `admission.retryTime`. Moves with every renewal.
    pub earliest_expiry: Timestamp,
    /// The blocking operation, named in the admission message.
    pub operation_id: String,
    /// The blocking `MysqlDatabase`, named in the admission message.
    pub instance: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_003_hold_never_delays_emergency_failover_fencing_or_reassertion() {
        assert!(!DisruptionKind::EmergencyFailover.consults_deployment_hold());
        assert!(!DisruptionKind::ReturningPrimaryFencing.consults_deployment_hold());
        assert!(!DisruptionKind::PrimaryReassertion.consults_deployment_hold());
    }

    #[test]
    fn seed_003_hold_defers_planned_failover_ordered_update_restore_in_place_and_rejoin() {
        assert!(DisruptionKind::PlannedFailover.consults_deployment_hold());
        assert!(DisruptionKind::OrderedUpdate.consults_deployment_hold());
        assert!(DisruptionKind::RestoreInPlace.consults_deployment_hold());
        assert!(DisruptionKind::Rejoin.consults_deployment_hold());
    }
}
