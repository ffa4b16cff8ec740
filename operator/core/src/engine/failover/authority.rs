//! Authority and cooldown: whether an authority move is in flight, the authority pushed every
//! poll, the "authority is moving" notice, and the cooldown's two persisted copies.

use bloodraven_api::{names, sidecar::Authority, PlannedFailoverPhase};

use crate::engine::action::{Action, AnnotationChange};
use crate::engine::memory::{EmergencyPhase, GroupMemory};
use crate::engine::plan::{Context, Plan};
use crate::time::Timestamp;

/// Whether an authority move is in flight (no site may be named active until it ends).
pub(in crate::engine) fn moving(memory: &GroupMemory) -> bool {
    let emergency =
        memory
            .emergency_failover
            .as_ref()
            .is_some_and(|failover| match failover.phase {
                EmergencyPhase::AwaitingLeaseExpiry
                | EmergencyPhase::CatchingUp { .. }
                | EmergencyPhase::Draining { .. } => true,
                EmergencyPhase::Promoting { .. } => false,
            });
    let planned = memory
        .planned_failover
        .as_ref()
        .is_some_and(|planned| match planned.phase {
            PlannedFailoverPhase::Draining => true,
            PlannedFailoverPhase::Admitting
            | PlannedFailoverPhase::Deferred
            | PlannedFailoverPhase::Promoting
            | PlannedFailoverPhase::Completed
            | PlannedFailoverPhase::Rejected => false,
        });
    emergency || planned || crate::engine::restore::holds_fenced(memory).is_some()
}

/// The authority naming the active site, as pushed every poll.
pub(super) fn current_authority(context: &Context<'_>, memory: &GroupMemory) -> Authority {
    Authority {
        group: context.group().to_string(),
        active_site: Some(memory.active_site.clone()),
        topology_generation: memory.topology_generation,
        issued_at: memory.authority_issued_at.unwrap_or(context.now),
        moving_from: None,
    }
}

/// The "authority is moving" notice. It carries the generation the move will end in
/// (current + 1): a sidecar accepts only a greater generation than the authority it caches,
/// and then accepts exactly one authority naming a site at that same generation (the
/// promotion, or a planned failover's abort re-asserting the old site).
fn move_notice(context: &Context<'_>, memory: &GroupMemory, announced_at: Timestamp) -> Authority {
    Authority {
        group: context.group().to_string(),
        active_site: None,
        topology_generation: notice_generation(memory),
        issued_at: announced_at,
        moving_from: Some(memory.active_site.clone()),
    }
}

/// The generation of the move notice: the one the move ends in.
pub(in crate::engine) fn notice_generation(memory: &GroupMemory) -> u64 {
    memory.next_generation()
}

/// Sends the move notice to every site's sidecar (idempotent; reaches the ones that missed it).
pub(in crate::engine) fn announce_move(
    context: &Context<'_>,
    memory: &GroupMemory,
    plan: &mut Plan,
    announced_at: Timestamp,
) {
    let notice = move_notice(context, memory, announced_at);
    for site in context.site_names() {
        plan.cross_site(Action::AnnounceAuthorityMove {
            site: site.to_string(),
            authority: notice.clone(),
        });
    }
}

/// The canonical replication source host of a site.
pub(in crate::engine) fn source_host_of(context: &Context<'_>, site: &str) -> String {
    names::source_host(context.group(), site, &context.observation.namespace)
}

/// The effective end of the cooldown: the later of the status and annotation copies.
pub(in crate::engine) fn cooldown_until(
    context: &Context<'_>,
    memory: &GroupMemory,
) -> Option<Timestamp> {
    match (
        memory.cooldown_until,
        context.observation.annotations.cooldown_until,
    ) {
        (Some(status), Some(annotation)) => Some(status.max(annotation)),
        (status, annotation) => status.or(annotation),
    }
}

/// Keeps both persisted copies of a running cooldown (docs/design/requirements.md R001.10:
/// "persisted twice"): a copy lost on its own (a status write that failed or was reverted, an
/// annotation removed) is rewritten from the surviving one, the later of the two, so only both
/// lost at once can produce `CooldownViolated(restart+stateLost)`. An expired cooldown is left
/// alone.
pub(in crate::engine) fn keep_cooldown_copies(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
) {
    let Some(until) = cooldown_until(context, memory) else {
        return;
    };
    if until <= context.now {
        return;
    }
    memory.cooldown_until = Some(until);
    let rewrite = Action::Annotate(AnnotationChange::SetCooldownUntil(until));
    if context.observation.annotations.cooldown_until != Some(until) && !plan.has_tail(&rewrite) {
        plan.tail(rewrite);
    }
}
