//! The failover-hold gate's rule (docs/design/requirements.md R003.16;
//! docs/design/history.md#issue-10-case-6), pure.
//!
//! A live failover-hold defers planned disruption, and the deploy API answers a hold POST
//! `201` as a promise that no planned failover will drain the primary while the hold is
//! unexpired. The poll reads the holds when it gathers and the API may grant one before the
//! poll's Fence runs, so the shell must re-check, atomically with the API's grants, before it
//! executes a decision that *starts* a deferrable disruption ([`gated_start`]); from then on
//! the gate stays closed (new grants and renewals answer `423 unstable`, the answer between
//! confirmed states of docs/design/requirements.md R003.13) while the disruption is in flight
//! ([`deferrable_disruption_in_flight`]), and it reopens once the decided memory no longer has
//! one (completed, rejected, aborted or dropped).
//!
//! A decision that starts a drain is decided from an observation without a hold; deciding the
//! same poll again with the hold the re-check found defers it (phase `Deferred`, deferReason
//! `DeploymentHold`) and fences nothing, because admission reads the hold before it fences.

use bloodraven_api::{Admission, DeferReason, PlannedFailoverPhase};

use super::memory::GroupMemory;
use crate::deploy::{DisruptionKind, HoldInfo};

/// The admission of a planned disruption a live failover-hold defers: `DeploymentHold`,
/// retried at the earliest expiry, its message naming `what` ("ordered update", "restore of
/// iad", ...), the blocking operation and instance and when the hold runs out.
pub fn hold_deferral(what: &str, hold: &HoldInfo) -> Admission {
    Admission {
        defer_reason: Some(DeferReason::DeploymentHold),
        retry_time: Some(hold.earliest_expiry),
        message: Some(format!(
            "{what} deferred by the failover-hold of operationId {} (instance {}) until {}",
            hold.operation_id, hold.instance, hold.earliest_expiry
        )),
    }
}

/// A deferrable disruption that a decision starts: what the shell closes the gate for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatedStart {
    /// Which disruption (always one that consults the failover-hold).
    pub kind: DisruptionKind,
    /// The active site it drains.
    pub from: String,
    /// The site it promotes.
    pub target: String,
    /// The topology generation it starts under (the one holds are stamped with).
    pub topology_generation: u64,
}

/// Whether a planned failover in `phase` has started moving the primary: the old primary is
/// (being) fenced, so a hold granted now could not defer anything.
pub(super) fn planned_moving(phase: PlannedFailoverPhase) -> bool {
    match phase {
        PlannedFailoverPhase::Draining | PlannedFailoverPhase::Promoting => true,
        PlannedFailoverPhase::Admitting
        | PlannedFailoverPhase::Deferred
        | PlannedFailoverPhase::Completed
        | PlannedFailoverPhase::Rejected => false,
    }
}

/// The deferrable disruption `decided` starts and `previous` had not: a planned failover
/// entering `Draining` (its decision fences the old primary; an ordered update's failover
/// included), an ordered update starting to recreate a site, a restore in place entering
/// `Fencing`, or the rejoin of a returning primary getting under way (`engine::rejoin`).
/// `None` for every other decision, including the later polls of a drain or a recreation
/// already under way.
pub fn gated_start(previous: &GroupMemory, decided: &GroupMemory) -> Option<GatedStart> {
    if let Some(start) = super::restore::gated_start(previous, decided) {
        return Some(start);
    }
    if let Some(start) = super::rejoin::gated_start(previous, decided) {
        return Some(start);
    }
    if let Some(start) = gated_roll(previous, decided) {
        return Some(start);
    }
    let planned = decided.planned_failover.as_ref()?;
    if !planned_moving(planned.phase) {
        return None;
    }
    let already_moving = previous
        .planned_failover
        .as_ref()
        .is_some_and(|before| planned_moving(before.phase));
    if already_moving {
        return None;
    }
    let kind = DisruptionKind::PlannedFailover;
    assert!(
        kind.consults_deployment_hold(),
        "the gate guards only disruptions a failover-hold defers"
    );
    Some(GatedStart {
        kind,
        from: planned.from.clone(),
        target: planned.target.clone(),
        topology_generation: previous.topology_generation,
    })
}

/// An ordered update starting to recreate a site (`engine::update`): a recreation it was not
/// already under way in `previous`. The gate is closed for the poll that deletes the pod; a
/// hold granted afterwards defers the update's next step (the recreation itself does not
/// move the primary, so it does not keep the gate closed).
fn gated_roll(previous: &GroupMemory, decided: &GroupMemory) -> Option<GatedStart> {
    let update = decided.ordered_update.as_ref()?;
    let site = update.rolling()?;
    // The same site of the same update already being recreated is not a new start (its step
    // clock may move: it stands still during an emergency failover).
    let already = previous.ordered_update.as_ref().is_some_and(|before| {
        before.rolling() == Some(site) && before.target_image == update.target_image
    });
    if already {
        return None;
    }
    let kind = DisruptionKind::OrderedUpdate;
    assert!(
        kind.consults_deployment_hold(),
        "the gate guards only disruptions a failover-hold defers"
    );
    Some(GatedStart {
        kind,
        from: decided.active_site.clone(),
        target: site.to_string(),
        topology_generation: previous.topology_generation,
    })
}

/// Whether a deferrable disruption is in flight in `memory` (a planned failover `Draining` or
/// `Promoting`): while it is, the gate closed by its [`gated_start`] stays closed.
pub fn deferrable_disruption_in_flight(memory: &GroupMemory) -> bool {
    super::restore::in_flight(memory)
        || super::rejoin::in_flight(memory)
        || memory
            .planned_failover
            .as_ref()
            .is_some_and(|planned| planned_moving(planned.phase))
}

#[cfg(test)]
mod tests {
    use bloodraven_api::{Admission, MysqlFailoverGroupSpec};

    use super::*;
    use crate::engine::PlannedFailover;
    use crate::time::Timestamp;

    fn spec() -> MysqlFailoverGroupSpec {
        serde_json::from_str(
            r#"{"flavor": "mariadb", "image": "mariadb:10.11", "initialActiveSite": "iad",
                "sites": [{"name": "iad", "role": "read-write"},
                          {"name": "pdx", "role": "read-write"},
                          {"name": "reader", "role": "read-only"}]}"#,
        )
        .expect("spec parses")
    }

    fn with_phase(phase: Option<PlannedFailoverPhase>) -> GroupMemory {
        let mut memory = GroupMemory::initial(&spec());
        memory.topology_generation = 17;
        memory.planned_failover = phase.map(|phase| PlannedFailover {
            target: "pdx".to_string(),
            from: "iad".to_string(),
            phase,
            admission: Admission::default(),
            requested_at: Timestamp(0),
            phase_since: Timestamp(0),
            fenced_at: None,
            annotation_cleared: false,
        });
        memory
    }

    const ALL: [Option<PlannedFailoverPhase>; 7] = [
        None,
        Some(PlannedFailoverPhase::Admitting),
        Some(PlannedFailoverPhase::Deferred),
        Some(PlannedFailoverPhase::Draining),
        Some(PlannedFailoverPhase::Promoting),
        Some(PlannedFailoverPhase::Completed),
        Some(PlannedFailoverPhase::Rejected),
    ];

    /// docs/design/requirements.md R003.16 / docs/design/history.md#issue-10-case-6: exactly
    /// the decision that moves a planned failover into Draining (from no request, Admitting,
    /// Deferred or a finished one) starts a disruption the gate must be closed for; a drain
    /// already under way does not start again.
    #[test]
    fn seed_003_only_the_decision_entering_draining_starts_a_gated_disruption() {
        for before in ALL {
            for after in ALL {
                let started = gated_start(&with_phase(before), &with_phase(after));
                let enters = after == Some(PlannedFailoverPhase::Draining)
                    || after == Some(PlannedFailoverPhase::Promoting);
                let was_moving = before == Some(PlannedFailoverPhase::Draining)
                    || before == Some(PlannedFailoverPhase::Promoting);
                let expected = (enters && !was_moving).then(|| GatedStart {
                    kind: DisruptionKind::PlannedFailover,
                    from: "iad".to_string(),
                    target: "pdx".to_string(),
                    topology_generation: 17,
                });
                assert_eq!(started, expected, "{before:?} -> {after:?}");
            }
        }
    }

    /// docs/design/history.md#issue-10-case-6: the gate stays closed while the planned failover
    /// drains or promotes and reopens once it completed, was rejected or aborted (no hold
    /// refused forever).
    #[test]
    fn seed_003_gate_stays_closed_only_while_draining_or_promoting() {
        for phase in ALL {
            let moving = matches!(
                phase,
                Some(PlannedFailoverPhase::Draining | PlannedFailoverPhase::Promoting)
            );
            assert_eq!(
                deferrable_disruption_in_flight(&with_phase(phase)),
                moving,
                "{phase:?}"
            );
        }
    }
}
