//! When the next poll starts (pure): every `pollInterval`, or sooner while a failover is in
//! flight or an issued authority is invalid.
//!
//! Each phase of a failover (lease wait, drain, promotion, confirmation of the new primary)
//! advances at a poll. At the spec's rhythm every phase costs a whole interval, so a write
//! outage would be detection + one interval per phase (about 11.5 s on the playground:
//! 5.5 s detection, then 2 s each for the fence, the promotion and the confirmation) where
//! docs/design/operator.md#authority-sidecars-and-fencing promises "detection floor + margin +
//! promotion". Once a failover has started, polls follow up every [`FOLLOW_UP_DIVISOR`]th of
//! the interval until it is over.
//!
//! An invalid authority sheds both shared Services on purpose, so its end is a write outage
//! until the poll that confirms the active site writable again. A fence that outlives it by
//! a few hundred milliseconds (mysqld's write deadline run by a stepped clock, scenario 041;
//! a restarted mysqld the sidecar unfences) would otherwise keep the primary shed for a whole
//! interval more; polls follow up while an issued authority is invalid too, within the same
//! window from the moment it turned invalid.
//!
//! Safety never rests on the rhythm: the detection floor is judged on the failure streak's
//! span, not its count ([`super::detection`]), the lease wait on the sidecars' reported
//! grant ages, and a drain on its own timeout. A failover stuck in flight (e.g. a lease
//! majority that cannot be reached) follows up only for [`FOLLOW_UP_WINDOW`], then the
//! rhythm is the spec's again.

use bloodraven_api::{MysqlFailoverGroupSpec, PlannedFailoverPhase};

use super::memory::GroupMemory;
use crate::time::{Duration, Timestamp};

/// Follow-up polls come every `pollInterval / FOLLOW_UP_DIVISOR` (250 ms at 2 s).
pub const FOLLOW_UP_DIVISOR: u32 = 8;
/// The shortest follow-up period, however short the poll interval.
pub const FOLLOW_UP_MIN: Duration = Duration::from_millis(100);
/// How long after a failover started polls keep following up.
pub const FOLLOW_UP_WINDOW: Duration = Duration::from_secs(60);

/// The period until the poll after the one that left `memory`, at `now`.
pub fn next_poll_in(
    spec: &MysqlFailoverGroupSpec,
    memory: &GroupMemory,
    now: Timestamp,
) -> Duration {
    let interval = spec.poll_interval.get();
    match in_flight_since(memory) {
        Some(since) if now.saturating_duration_since(since) < FOLLOW_UP_WINDOW => (interval
            / FOLLOW_UP_DIVISOR)
            .max(FOLLOW_UP_MIN)
            .min(interval),
        _ => interval,
    }
}

/// When the failover in flight started: an emergency failover from its detection, a planned
/// one from its request while it is admitted, draining or promoting (not while deferred or
/// once over); with none, when an issued authority turned invalid.
fn in_flight_since(memory: &GroupMemory) -> Option<Timestamp> {
    if let Some(emergency) = &memory.emergency_failover {
        return Some(emergency.detected_at);
    }
    planned_in_flight_since(memory).or_else(|| {
        memory
            .authority_invalid_since
            .filter(|_| memory.topology_generation > 0 && !memory.authority.is_valid())
    })
}

/// When the planned failover in flight was requested, while it is admitted, draining or
/// promoting.
fn planned_in_flight_since(memory: &GroupMemory) -> Option<Timestamp> {
    memory
        .planned_failover
        .as_ref()
        .filter(|planned| {
            matches!(
                planned.phase,
                PlannedFailoverPhase::Admitting
                    | PlannedFailoverPhase::Draining
                    | PlannedFailoverPhase::Promoting
            )
        })
        .map(|planned| planned.requested_at)
}
