//! Planned failover (annotation `bloodraven.shipstream.io/planned-failover=<site>`):
//! `Admitting -> (Deferred) -> Draining -> Promoting -> Completed`, or `Rejected`.
//!
//! Admission: inside the cooldown, `onCooldown: reject` rejects and `defer` parks the request
//! in `Deferred` until `cooldownUntil`; a live failover-hold defers it with `DeploymentHold`,
//! `retryTime` = the earliest hold expiry and a message naming the blocking operation and
//! instance (docs/design/requirements.md R003.16). Draining fences the old primary
//! (`role=fenced`, read_only, connections killed) and announces the authority move; the target
//! is promoted only once the old primary is confirmed read-only and the target holds every one
//! of its transactions: zero lost transactions.

use bloodraven_api::{
    sidecar::PromoteDrain, Admission, DeferReason, FailoverKind, OnCooldown, PlannedFailoverPhase,
    SiteRole,
};
use bloodraven_mysql::{lost_transactions, same_host};

use super::action::{Action, AnnotationChange, EventReason, MetricObservation};
use super::failover::{
    announce_move, cooldown_until, issue_promotion, old_site_confirmed_unwritable, promote_action,
    source_host_of,
};
use super::memory::{Detection, GroupMemory, PlannedFailover, SiteState};
use super::options::{PLANNED_ADMISSION_TIMEOUT, PLANNED_DRAIN_TIMEOUT};
use super::plan::{Context, Plan};
use crate::deploy::RevokeReason;
use crate::time::Timestamp;

/// Takes a new request from the annotation and advances the one in flight.
pub(super) fn planned_step(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    // The annotation, else the planned failover an ordered update requests (`engine::update`).
    let annotation = context
        .observation
        .annotations
        .planned_failover
        .clone()
        .or_else(|| super::update::failover_request(memory));
    let now = context.now;
    let new_request = match (memory.planned_failover.as_mut(), annotation) {
        (None, None) => return,
        (None, Some(target)) => Some(target),
        (Some(planned), annotation) => match planned.phase {
            PlannedFailoverPhase::Completed | PlannedFailoverPhase::Rejected => match annotation {
                None => {
                    planned.annotation_cleared = true;
                    return;
                }
                Some(target) if target == planned.target && !planned.annotation_cleared => {
                    plan.tail(Action::Annotate(AnnotationChange::ClearPlannedFailover));
                    return;
                }
                Some(target) => Some(target),
            },
            PlannedFailoverPhase::Admitting | PlannedFailoverPhase::Deferred => match annotation {
                None => {
                    let target = planned.target.clone();
                    reject(
                        planned,
                        plan,
                        format!("request for {target} withdrawn (annotation removed)"),
                    );
                    planned.annotation_cleared = true;
                    return;
                }
                Some(target) if target != planned.target => Some(target),
                Some(_) => None,
            },
            PlannedFailoverPhase::Draining | PlannedFailoverPhase::Promoting => None,
        },
    };
    if let Some(target) = new_request {
        memory.planned_failover = Some(PlannedFailover {
            target: target.clone(),
            from: memory.active_site.clone(),
            phase: PlannedFailoverPhase::Admitting,
            admission: Admission::default(),
            requested_at: now,
            phase_since: now,
            fenced_at: None,
            annotation_cleared: false,
        });
        plan.event(
            EventReason::PlannedFailoverAdmitting,
            format!(
                "planned failover {} -> {target} requested",
                memory.active_site
            ),
        );
    }
    if memory.emergency_failover.is_some() {
        return;
    }
    let Some(phase) = memory
        .planned_failover
        .as_ref()
        .map(|planned| planned.phase)
    else {
        return;
    };
    match phase {
        PlannedFailoverPhase::Admitting | PlannedFailoverPhase::Deferred => {
            admit(context, memory, plan)
        }
        PlannedFailoverPhase::Draining => drain(context, memory, plan),
        PlannedFailoverPhase::Promoting
        | PlannedFailoverPhase::Completed
        | PlannedFailoverPhase::Rejected => {}
    }
}

fn reject(planned: &mut PlannedFailover, plan: &mut Plan, message: String) {
    end(planned, plan, EventReason::PlannedFailoverRejected, message);
}

/// Ends a planned failover for good (`Rejected`, its annotation cleared) with `message` in its
/// admission and an Event of `reason` (rejected, or aborted by an emergency or a newer notice).
pub(super) fn end(
    planned: &mut PlannedFailover,
    plan: &mut Plan,
    reason: EventReason,
    message: String,
) {
    planned.phase = PlannedFailoverPhase::Rejected;
    planned.admission = Admission {
        defer_reason: None,
        retry_time: None,
        message: Some(message.clone()),
    };
    plan.tail(Action::Annotate(AnnotationChange::ClearPlannedFailover));
    plan.event(reason, message);
}

fn defer(planned: &mut PlannedFailover, plan: &mut Plan, admission: Admission, now: Timestamp) {
    let entering = planned.phase != PlannedFailoverPhase::Deferred;
    let message = admission.message.clone().unwrap_or_default();
    planned.phase = PlannedFailoverPhase::Deferred;
    planned.admission = admission;
    if entering {
        planned.phase_since = now;
        plan.tail(Action::Metric(MetricObservation::PlannedFailoverDeferred));
        plan.event(EventReason::PlannedFailoverDeferred, message);
    }
}

/// Leaves `Deferred` once nothing defers the request any more: it re-enters `Admitting`
/// (docs/design/requirements.md R003.16: it "goes back to `Admitting`, is validated again, and
/// continues without help") for this poll, and the admission bound restarts, since time spent
/// deferred is not time spent failing admission.
fn readmit(planned: &mut PlannedFailover, plan: &mut Plan, now: Timestamp) {
    let cleared = match planned.admission.defer_reason {
        Some(DeferReason::Cooldown) => "the failover cooldown ended",
        Some(DeferReason::DeploymentHold) => "the failover-hold was released or lapsed",
        None => "nothing defers it any more",
    };
    let message = format!(
        "planned failover {} -> {} re-enters Admitting: {cleared}",
        planned.from, planned.target
    );
    planned.phase = PlannedFailoverPhase::Admitting;
    planned.phase_since = now;
    planned.admission = Admission {
        defer_reason: None,
        retry_time: None,
        message: Some(message.clone()),
    };
    plan.event(EventReason::PlannedFailoverAdmitting, message);
}

fn admit(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    let now = context.now;
    let active = memory.active_site.clone();
    let cooldown = cooldown_until(context, memory);
    let authority_valid = memory.authority.is_valid();
    let hold = context.observation.deploy_hold.clone();
    let target_ready = memory
        .planned_failover
        .as_ref()
        .is_some_and(|planned| target_is_ready(context, memory, &planned.target));
    let Some(planned) = memory.planned_failover.as_mut() else {
        return;
    };
    let target = planned.target.clone();
    match context.role(&target) {
        None => {
            return reject(
                planned,
                plan,
                format!("target {target} is not a site of this group"),
            )
        }
        Some(SiteRole::ReadOnly) => {
            return reject(
                planned,
                plan,
                format!("target {target} is a read-only site"),
            );
        }
        Some(SiteRole::ReadWrite) => {}
    }
    if target == active {
        return reject(
            planned,
            plan,
            format!("target {target} is already the active site"),
        );
    }
    if let Some(until) = cooldown.filter(|until| now < *until) {
        match context.spec.planned_failover.on_cooldown {
            OnCooldown::Reject => {
                return reject(
                    planned,
                    plan,
                    format!("inside the failover cooldown until {until} (onCooldown: reject)"),
                );
            }
            OnCooldown::Defer => {
                return defer(
                    planned,
                    plan,
                    Admission {
                        defer_reason: Some(DeferReason::Cooldown),
                        retry_time: Some(until),
                        message: Some(format!(
                            "inside the failover cooldown; retried at {until} (onCooldown: defer)"
                        )),
                    },
                    now,
                );
            }
        }
    }
    if let Some(hold) = hold {
        return defer(
            planned,
            plan,
            super::gate::hold_deferral("planned failover", &hold),
            now,
        );
    }
    match planned.phase {
        PlannedFailoverPhase::Deferred => return readmit(planned, plan, now),
        PlannedFailoverPhase::Admitting
        | PlannedFailoverPhase::Draining
        | PlannedFailoverPhase::Promoting
        | PlannedFailoverPhase::Completed
        | PlannedFailoverPhase::Rejected => {}
    }
    if !(authority_valid && target_ready) {
        if now.saturating_duration_since(planned.phase_since) > PLANNED_ADMISSION_TIMEOUT {
            return reject(
                planned,
                plan,
                format!("{target} did not become a healthy replica of {active} within {PLANNED_ADMISSION_TIMEOUT:?}"),
            );
        }
        planned.phase = PlannedFailoverPhase::Admitting;
        planned.admission = Admission {
            defer_reason: None,
            retry_time: None,
            message: Some(format!(
                "waiting for a valid authority and {target} to be a healthy, converged replica of {active} within maxLagSeconds"
            )),
        };
        return;
    }
    planned.phase = PlannedFailoverPhase::Draining;
    planned.phase_since = now;
    planned.fenced_at = None;
    planned.from = active.clone();
    planned.admission = Admission::default();
    plan.cross_site(Action::Fence {
        site: active.clone(),
        request: fence_request(context, memory.topology_generation, &target),
    });
    announce_move(context, memory, plan, now);
    plan.transition_site(context, memory, &active, SiteState::Demoted);
    plan.event(
        EventReason::PlannedFailoverDraining,
        format!("planned failover {active} -> {target}: {active} fenced (read_only, connections killed)"),
    );
}

fn fence_request(
    context: &Context<'_>,
    topology_generation: u64,
    target: &str,
) -> bloodraven_api::sidecar::FenceRequest {
    bloodraven_api::sidecar::FenceRequest {
        group: context.group().to_string(),
        topology_generation,
        kill_connections: true,
        reason: format!("planned failover to {target}"),
    }
}

/// The target is a serving replica of the active site: reachable, replicating from the
/// active site's internal Service, with no errant transactions, and a reported lag within
/// `maxLagSeconds` (Draining fences the old primary, so a target far behind would make the
/// switchover a write outage bounded only by `PLANNED_DRAIN_TIMEOUT`).
fn target_is_ready(context: &Context<'_>, memory: &GroupMemory, target: &str) -> bool {
    let view = context.view(target);
    let active_host = source_host_of(context, &memory.active_site);
    let direct = view
        .replication
        .as_ref()
        .and_then(|replication| replication.source_host.as_deref())
        .is_some_and(|host| same_host(host, &active_host, &context.observation.namespace));
    let no_errant = memory
        .site(target)
        .and_then(|site| site.errant.as_ref())
        .is_some_and(|errant| errant.is_empty());
    let state = memory.site(target).map(|site| site.state);
    let lag_within_limit = view
        .replication
        .as_ref()
        .and_then(|replication| replication.seconds_behind_source)
        .is_some_and(|lag| lag <= context.spec.max_lag_seconds);
    view.is_up()
        && view.replicating()
        && direct
        && no_errant
        && lag_within_limit
        && state == Some(SiteState::Replica)
        // Awaiting a restore's re-seed: it holds what the restore discarded, under GTIDs the
        // restored site reuses, so "no errant transactions" proves nothing of it.
        && !super::restore::withholds(memory, target)
}

fn drain(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    let now = context.now;
    let Some(planned) = memory.planned_failover.clone() else {
        return;
    };
    let (from, target) = (planned.from.clone(), planned.target.clone());
    // The authority no longer sits with the site this drain started from (memory adopted a
    // newer authority from the sidecars after a restart, or another path moved it): the
    // planned failover is stale. It is dropped without touching authority; re-asserting
    // `from` here would hand writes to a site that is no longer active (found by the
    // simulator with --state-loss --status-revert, seed 450).
    if memory.active_site != from {
        let message = format!(
            "planned failover {from} -> {target} dropped: the active site is now {:?}",
            memory.active_site
        );
        if let Some(planned) = memory.planned_failover.as_mut() {
            reject(planned, plan, message);
        }
        return;
    }
    let old_view = context.view(&from);
    let confirmed = old_site_confirmed_unwritable(context, memory, &from) && old_view.mysql_up;
    if confirmed {
        if let Some(planned) = memory.planned_failover.as_mut() {
            planned.fenced_at = planned.fenced_at.or(Some(now));
        }
    }
    let caught_up = confirmed
        && old_view
            .gtid
            .as_ref()
            .zip(context.view(&target).gtid.as_ref())
            .is_some_and(|(old, new)| lost_transactions(old, new).is_empty());
    if caught_up && context.view(&target).detached() {
        issue_promotion(context, memory, plan, &target, FailoverKind::Planned, &from);
        if let Some(planned) = memory.planned_failover.as_mut() {
            planned.phase = PlannedFailoverPhase::Promoting;
            planned.phase_since = now;
        }
        plan.event(
            EventReason::PlannedFailoverPromoting,
            format!("planned failover {from} -> {target}: {target} holds every transaction of {from}; promoting"),
        );
        return;
    }
    // A target detected failed cannot finish the drain: every poll spent waiting for it is a
    // write outage (the old primary is fenced), so it aborts at once.
    let target_failed = memory
        .site(&target)
        .is_some_and(|site| site.detection == Detection::Failed);
    if target_failed || now.saturating_duration_since(planned.phase_since) > PLANNED_DRAIN_TIMEOUT {
        abort(context, memory, plan, &from, &target, target_failed);
        return;
    }
    announce_move(context, memory, plan, planned.phase_since);
    if !confirmed {
        plan.cross_site(Action::Fence {
            site: from.clone(),
            request: fence_request(context, memory.topology_generation, &target),
        });
    } else if let (true, Some(old)) = (caught_up, old_view.gtid.as_ref()) {
        let drain = PromoteDrain::UntilGtidSet(old.to_string());
        plan.cross_site(promote_action(context, &target, drain));
    }
}

/// Gives the authority back to the old site under a new generation (which also lifts the
/// fence issued under the old one) when Draining did not finish within its bound.
fn abort(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
    from: &str,
    target: &str,
    target_failed: bool,
) {
    memory.advance_generation();
    memory.active_site = from.to_string();
    memory.authority_issued_at = Some(context.now);
    plan.transition_site(context, memory, from, SiteState::Active);
    plan.cross_site(Action::RevokeDeployLeases {
        reason: RevokeReason::TopologyChanged,
        topology_generation: memory.topology_generation,
    });
    let why = if target_failed {
        format!("{target} failed while draining")
    } else {
        format!("not drained within {PLANNED_DRAIN_TIMEOUT:?}")
    };
    let message = format!(
        "planned failover {from} -> {target} aborted: {why}; {from} re-asserted at generation {}",
        memory.topology_generation
    );
    plan.event(EventReason::PlannedFailoverAborted, message.clone());
    if let Some(planned) = memory.planned_failover.as_mut() {
        reject(planned, plan, message);
    }
}

/// Marks a planned failover in `Promoting` completed (called once the new active site is
/// confirmed writable).
pub(super) fn complete(memory: &mut GroupMemory, plan: &mut Plan) {
    let Some(planned) = memory.planned_failover.as_mut() else {
        return;
    };
    match planned.phase {
        PlannedFailoverPhase::Promoting => {
            planned.phase = PlannedFailoverPhase::Completed;
            plan.tail(Action::Annotate(AnnotationChange::ClearPlannedFailover));
            plan.event(
                EventReason::PlannedFailoverCompleted,
                format!(
                    "planned failover {} -> {} completed with zero lost transactions",
                    planned.from, planned.target
                ),
            );
        }
        PlannedFailoverPhase::Admitting
        | PlannedFailoverPhase::Deferred
        | PlannedFailoverPhase::Draining
        | PlannedFailoverPhase::Completed
        | PlannedFailoverPhase::Rejected => {}
    }
}
