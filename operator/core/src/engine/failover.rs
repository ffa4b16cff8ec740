//! Emergency failover, the promotion step shared with planned failover, completion,
//! returning-primary fencing, and the every-poll convergence (authority push or move notice,
//! repointing, errant bookkeeping).

use bloodraven_api::{
    names,
    sidecar::{Authority, PromoteDrain, PromoteRequest, RepointRequest},
    FailoverKind, LastFailover, PlannedFailoverPhase, SiteRole,
};
use bloodraven_mysql::{errant_transactions, lost_transactions, same_host, GtidSet};

use super::action::{Action, AnnotationChange, EventReason, MetricObservation};
use super::agentless::{kill_agentless_old_primary, promotion_held};
use super::lease_wait::{lease_wait, terms_differ_from_spec};
use super::memory::{Detection, EmergencyFailover, EmergencyPhase, GroupMemory, SiteState};
use super::options::{DRAIN_POLLS_MAX, DRAIN_TIMEOUT};
use super::plan::{Context, Plan};
use super::reading::mysql_flavor;
use crate::deploy::RevokeReason;
use crate::time::Timestamp;

/// Whether an authority move is in flight (no site may be named active until it ends).
pub(super) fn moving(memory: &GroupMemory) -> bool {
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
    emergency || planned || super::restore::holds_fenced(memory).is_some()
}

/// The authority naming the active site, as pushed every poll.
pub(super) fn current_authority(context: &Context<'_>, memory: &GroupMemory) -> Authority {
    Authority {
        group: context.group().to_string(),
        active_site: Some(memory.active_site.clone()),
        topology_generation: memory.topology_generation,
        issued_at: memory.authority_issued_at.unwrap_or(context.now),
    }
}

/// The "authority is moving" notice. It carries the generation the move will end in
/// (current + 1): a sidecar accepts only a greater generation than the authority it caches,
/// and then accepts exactly one authority naming a site at that same generation (the
/// promotion, or a planned failover's abort re-asserting the old site).
pub(super) fn move_notice(
    context: &Context<'_>,
    memory: &GroupMemory,
    announced_at: Timestamp,
) -> Authority {
    Authority {
        group: context.group().to_string(),
        active_site: None,
        topology_generation: notice_generation(memory),
        issued_at: announced_at,
    }
}

/// The generation of the move notice: the one the move ends in.
pub(super) fn notice_generation(memory: &GroupMemory) -> u64 {
    memory.topology_generation + 1
}

/// Sends the move notice to every site's sidecar (idempotent; reaches the ones that missed it).
pub(super) fn announce_move(
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
pub(super) fn source_host_of(context: &Context<'_>, site: &str) -> String {
    names::source_host(context.group(), site, &context.observation.namespace)
}

/// The effective end of the cooldown: the later of the status and annotation copies.
pub(super) fn cooldown_until(context: &Context<'_>, memory: &GroupMemory) -> Option<Timestamp> {
    match (
        memory.cooldown_until,
        context.observation.annotations.cooldown_until,
    ) {
        (Some(status), Some(annotation)) => Some(status.max(annotation)),
        (status, annotation) => status.or(annotation),
    }
}

/// Keeps both persisted copies of a running cooldown (seed 001: "persisted twice"): a copy
/// lost on its own (a status write that failed or was reverted, an annotation removed) is
/// rewritten from the surviving one, the later of the two, so only both lost at once can
/// produce `CooldownViolated(restart+stateLost)`. An expired cooldown is left alone.
pub(super) fn keep_cooldown_copies(
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

/// The emergency failover rule: starts one when the active site is `Failed` (the cooldown
/// gates it; a deploy hold is never read), and advances one in flight.
pub(super) fn emergency_step(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    abandon_failed_promotion(memory);
    if memory.emergency_failover.is_none() {
        take_over_failed_planned_drain(context, memory, plan);
    }
    if memory.emergency_failover.is_none() {
        maybe_start_emergency(context, memory, plan);
    }
    let Some(failover) = memory.emergency_failover.clone() else {
        return;
    };
    // In every phase: a hang of the old sidecar may show at its kubelet only after the
    // promotion, and the kill then still shortens what a thawing mysqld could serve.
    let agent = kill_agentless_old_primary(context, memory, &failover, plan);
    match failover.phase {
        EmergencyPhase::AwaitingLeaseExpiry => {
            announce_move(context, memory, plan, failover.announced_at);
            let confirmed = !failover.holder_unknown
                && old_site_confirmed_unwritable(context, memory, &failover.from);
            let wait = lease_wait(context, memory);
            let skipped = context.options.unsafe_skip_lease_wait;
            let lapsed = wait.lapsed();
            if lapsed && !confirmed && !skipped {
                if let Some(why) = promotion_held(context, &failover, agent, plan) {
                    plan.event(EventReason::AwaitingLeaseExpiry, why);
                    return;
                }
            }
            if !(confirmed || lapsed || skipped) {
                if terms_differ_from_spec(context) {
                    plan.event(
                        EventReason::LeaseTermsDiffer,
                        format!(
                            "sidecars run with other lease terms than the spec (pods not yet recreated): waiting {:?} and for a majority of every site set: {}",
                            wait.bound,
                            wait.describe()
                        ),
                    );
                }
                plan.event(
                    EventReason::AwaitingLeaseExpiry,
                    format!(
                        "waiting for a majority of every site set's sidecars to report their last lease grant older than {:?}: {}",
                        wait.bound,
                        wait.describe()
                    ),
                );
                return;
            }
            if skipped && !(confirmed || lapsed) {
                plan.event(
                    EventReason::LeaseWaitSkipped,
                    format!(
                        "UNSAFE: promoting without waiting for {}'s lease (test-only switch)",
                        failover.from
                    ),
                );
            } else {
                plan.event(
                    EventReason::OldPrimaryFenced,
                    if confirmed {
                        format!(
                            "{} confirmed read-only or down by its sidecar",
                            failover.from
                        )
                    } else {
                        format!(
                            "a majority of sidecars stopped granting {} a lease",
                            failover.from
                        )
                    },
                );
            }
            let fenced_at = Some(context.now);
            start_draining(context, memory, plan, &failover.from, fenced_at, &[]);
        }
        EmergencyPhase::CatchingUp { to, source, polls } => {
            announce_move(context, memory, plan, failover.announced_at);
            let missing = missing_from(context, &source, &to);
            let caught_up = missing == Some(0);
            let gave_up = !context.view(&to).is_up()
                || !context.view(&source).is_up()
                || polls >= DRAIN_POLLS_MAX;
            if caught_up || gave_up {
                if !caught_up {
                    plan.event(
                        EventReason::CatchingUp,
                        format!(
                            "{to} did not catch up with {source} within {polls} polls; promoting it without {source}'s extra transactions"
                        ),
                    );
                }
                drain_candidate(context, memory, plan, &to);
                return;
            }
            if let Some(failover) = memory.emergency_failover.as_mut() {
                failover.phase = EmergencyPhase::CatchingUp {
                    to: to.clone(),
                    source: source.clone(),
                    polls: polls + 1,
                };
            }
            if !replicates_from(context, &to, &source) {
                plan.cross_site(repoint_action(context, &to, &source));
            }
        }
        EmergencyPhase::Draining { to, polls } => {
            let view = context.view(&to);
            if view.detached() {
                issue_promotion(
                    context,
                    memory,
                    plan,
                    &to,
                    FailoverKind::Emergency,
                    &failover.from,
                );
                if let Some(failover) = memory.emergency_failover.as_mut() {
                    failover.phase = EmergencyPhase::Promoting { to: to.clone() };
                }
                return;
            }
            announce_move(context, memory, plan, failover.announced_at);
            let candidate_lost = !view.is_up()
                || memory
                    .site(&to)
                    .is_some_and(|s| s.detection == Detection::Failed)
                || polls >= DRAIN_POLLS_MAX;
            if candidate_lost {
                start_draining(
                    context,
                    memory,
                    plan,
                    &failover.from,
                    failover.fenced_at,
                    &[to.as_str()],
                );
            } else {
                if let Some(failover) = memory.emergency_failover.as_mut() {
                    failover.phase = EmergencyPhase::Draining {
                        to: to.clone(),
                        polls: polls + 1,
                    };
                }
                plan.cross_site(promote_action(context, &to, PromoteDrain::Received));
            }
        }
        EmergencyPhase::Promoting { .. } => {}
    }
}

/// An emergency promotion whose new active site is detected `Failed` before it was ever
/// confirmed writable is over: waiting for a confirmation that cannot come would block every
/// later failover of that site. The site is then an ordinary failed active site, failed over
/// by [`maybe_start_emergency`] (cooldown-gated; `lastFailover` stays uncompleted until the
/// next promotion replaces it).
fn abandon_failed_promotion(memory: &mut GroupMemory) {
    let Some(failover) = memory.emergency_failover.as_ref() else {
        return;
    };
    let to = match &failover.phase {
        EmergencyPhase::Promoting { to } => to,
        EmergencyPhase::AwaitingLeaseExpiry
        | EmergencyPhase::CatchingUp { .. }
        | EmergencyPhase::Draining { .. } => return,
    };
    let failed = memory
        .site(to)
        .is_some_and(|site| site.detection == Detection::Failed);
    if failed {
        memory.emergency_failover = None;
    }
}

/// A planned failover in `Draining` whose old primary is detected `Failed` becomes an
/// emergency failover at once, instead of waiting out [`PLANNED_DRAIN_TIMEOUT`] with no
/// writable site: the old primary is already fenced (`Demoted`, tainted) and the move notice
/// of the same generation is already out, so the emergency resumes at the lease wait, which
/// still ends on evidence only. The cooldown was checked when the planned failover was
/// admitted and no promotion happened since; a deploy hold is never read (seed 003).
///
/// [`PLANNED_DRAIN_TIMEOUT`]: super::options::PLANNED_DRAIN_TIMEOUT
fn take_over_failed_planned_drain(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
) {
    let Some(planned) = memory.planned_failover.as_ref() else {
        return;
    };
    match planned.phase {
        PlannedFailoverPhase::Draining => {}
        PlannedFailoverPhase::Admitting
        | PlannedFailoverPhase::Deferred
        | PlannedFailoverPhase::Promoting
        | PlannedFailoverPhase::Completed
        | PlannedFailoverPhase::Rejected => return,
    }
    let (from, target, announced_at, fenced_at) = (
        planned.from.clone(),
        planned.target.clone(),
        planned.phase_since,
        planned.fenced_at,
    );
    let Some(old) = memory.site(&from) else {
        return;
    };
    if old.detection != Detection::Failed {
        return;
    }
    let started_at = old.failing_since.unwrap_or(context.now);
    let detected_at = old.failed_at.unwrap_or(context.now);
    let message = format!(
        "planned failover {from} -> {target} abandoned: {from} failed while draining; emergency failover takes over"
    );
    match memory.planned_failover.as_mut() {
        Some(planned) => {
            super::planned::end(planned, plan, EventReason::PlannedFailoverAborted, message);
        }
        None => {
            plan.tail(Action::Annotate(AnnotationChange::ClearPlannedFailover));
            plan.event(EventReason::PlannedFailoverAborted, message);
        }
    }
    memory.emergency_failover = Some(EmergencyFailover {
        from: from.clone(),
        phase: EmergencyPhase::AwaitingLeaseExpiry,
        announced_at,
        started_at,
        detected_at,
        fenced_at,
        holder_unknown: false,
    });
    plan.event(
        EventReason::EmergencyFailoverStarted,
        format!(
            "{from} failed while a planned failover drained it; authority move already announced"
        ),
    );
}

fn maybe_start_emergency(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    // No authority was ever issued: nothing was writable, so nothing fails over.
    if moving(memory) || memory.topology_generation == 0 {
        return;
    }
    let from = memory.active_site.clone();
    let Some(site) = memory.site(&from) else {
        return;
    };
    // A spec edit that made the active site read-only takes the authority away from it the
    // same safe way as a failure (a read-only site is never writable).
    let read_only_by_spec = match context.role(&from) {
        Some(SiteRole::ReadOnly) => true,
        Some(SiteRole::ReadWrite) | None => false,
    };
    if site.state != SiteState::Active
        || !(site.detection == Detection::Failed || read_only_by_spec)
    {
        return;
    }
    let just_failed = site.failed_at == Some(context.now);
    let started_at = site.failing_since.unwrap_or(context.now);
    let detected_at = site.failed_at.unwrap_or(context.now);
    if let Some(until) = cooldown_until(context, memory) {
        if context.now < until {
            if just_failed {
                plan.event(
                    EventReason::EmergencyFailoverBlockedByCooldown,
                    format!("active site {from} failed inside the cooldown (until {until}); no failover"),
                );
            }
            return;
        }
    }
    if select_candidate(context, memory, &from, &[]).is_none() {
        if just_failed {
            plan.event(
                EventReason::NoFailoverCandidate,
                format!("active site {from} failed and no read-write site qualifies as candidate"),
            );
        }
        return;
    }
    // A planned failover waiting for admission yields to the emergency and is re-admitted
    // afterwards (against the new active site and the new cooldown). One whose target was
    // promoted and failed before it was confirmed writable is over: the emergency replaces it.
    if let Some(planned) = memory.planned_failover.as_mut() {
        match planned.phase {
            PlannedFailoverPhase::Promoting => {
                let message = format!(
                    "planned failover {} -> {} abandoned: {from} failed before it was confirmed writable; emergency failover takes over",
                    planned.from, planned.target
                );
                super::planned::end(planned, plan, EventReason::PlannedFailoverAborted, message);
            }
            PlannedFailoverPhase::Admitting
            | PlannedFailoverPhase::Deferred
            | PlannedFailoverPhase::Draining
            | PlannedFailoverPhase::Completed
            | PlannedFailoverPhase::Rejected => {}
        }
    }
    memory.emergency_failover = Some(EmergencyFailover {
        from: from.clone(),
        phase: EmergencyPhase::AwaitingLeaseExpiry,
        announced_at: context.now,
        started_at,
        detected_at,
        fenced_at: None,
        holder_unknown: false,
    });
    if let Some(role) = context.role(&from) {
        let node = context.view(&from).node_name.clone();
        plan.transition(memory, &from, role, node.as_deref(), SiteState::Demoted);
    }
    plan.event(
        EventReason::EmergencyFailoverStarted,
        if read_only_by_spec {
            format!("active site {from} is read-only in the spec; authority move announced")
        } else {
            format!("active site {from} failed; authority move announced")
        },
    );
}

/// Picks a candidate and tells it to drain, or stays waiting when there is none.
fn start_draining(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
    from: &str,
    fenced_at: Option<Timestamp>,
    excluded: &[&str],
) {
    let candidate = select_candidate(context, memory, from, excluded)
        .or_else(|| select_candidate(context, memory, from, &[]))
        .or_else(|| old_site_as_last_resort(context, memory, from));
    let catch_up = candidate
        .as_deref()
        .and_then(|to| catch_up_source(context, memory, from, to));
    let Some(failover) = memory.emergency_failover.as_mut() else {
        return;
    };
    failover.fenced_at = failover.fenced_at.or(fenced_at);
    match (candidate, catch_up) {
        (None, _) => {
            failover.phase = EmergencyPhase::AwaitingLeaseExpiry;
            plan.event(
                EventReason::NoFailoverCandidate,
                format!("{from} is fenced but no read-write site qualifies as candidate yet"),
            );
        }
        (Some(to), Some((source, missing))) => {
            failover.phase = EmergencyPhase::CatchingUp {
                to: to.clone(),
                source: source.clone(),
                polls: 0,
            };
            plan.cross_site(repoint_action(context, &to, &source));
            plan.event(
                EventReason::CatchingUp,
                format!(
                    "{to} lacks {missing} transaction(s) {source} received from {from}: it replicates from {source} before it drains"
                ),
            );
        }
        (Some(to), None) => drain_candidate(context, memory, plan, &to),
    }
}

/// Puts the failover in `Draining` for `to` and sends the `Promote` that drains and detaches.
fn drain_candidate(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan, to: &str) {
    if let Some(failover) = memory.emergency_failover.as_mut() {
        failover.phase = EmergencyPhase::Draining {
            to: to.to_string(),
            polls: 0,
        };
    }
    plan.cross_site(promote_action(context, to, PromoteDrain::Received));
    plan.event(
        EventReason::Draining,
        format!("{to} drains its relay log and detaches replication"),
    );
}

/// The site (other than the failed `from` and the candidate `to`) that is up, a healthy
/// replica, and holds the most transactions `to` lacks, with how many: the candidate must
/// fetch them before it is promoted. `None` when `to` lacks nothing any site holds.
fn catch_up_source(
    context: &Context<'_>,
    memory: &GroupMemory,
    from: &str,
    to: &str,
) -> Option<(String, u64)> {
    context
        .site_names()
        .filter(|name| *name != from && *name != to)
        .filter(|name| {
            context.view(name).is_up()
                && memory.site(name).is_some_and(|entry| {
                    entry.state == SiteState::Replica && entry.detection != Detection::Failed
                })
        })
        .filter_map(|name| {
            missing_from(context, name, to)
                .filter(|missing| *missing > 0)
                .map(|missing| (name.to_string(), missing))
        })
        .max_by_key(|(_, missing)| *missing)
}

/// How many transactions `source` holds that `to` lacks (`None` when either GTID set is
/// unknown).
fn missing_from(context: &Context<'_>, source: &str, to: &str) -> Option<u64> {
    let source_gtid = context.view(source).gtid.as_ref()?;
    let to_gtid = context.view(to).gtid.as_ref()?;
    Some(lost_transactions(source_gtid, to_gtid).count())
}

/// Whether `site` replicates from `source` now.
fn replicates_from(context: &Context<'_>, site: &str, source: &str) -> bool {
    let host = source_host_of(context, source);
    context
        .view(site)
        .replication
        .as_ref()
        .and_then(|replication| replication.source_host.as_deref())
        .is_some_and(|current| same_host(current, &host, &context.observation.namespace))
}

/// `POST /v1/repoint` of `site` to `source`'s internal Service.
fn repoint_action(context: &Context<'_>, site: &str, source: &str) -> Action {
    Action::Repoint {
        site: site.to_string(),
        request: RepointRequest {
            group: context.group().to_string(),
            source_host: source_host_of(context, source),
            source_port: names::PORT_MYSQL,
        },
    }
}

/// The old active site itself, when it answers again and no other site qualifies: it holds
/// the most advanced history by definition, and giving it the authority back (under the
/// move's generation) ends a write outage that would otherwise last until another site
/// returns. Only ever after the lease wait (or confirmation) has ended.
fn old_site_as_last_resort(
    context: &Context<'_>,
    memory: &GroupMemory,
    from: &str,
) -> Option<String> {
    let view = context.view(from);
    let demoted = memory
        .site(from)
        .is_some_and(|site| site.state == SiteState::Demoted);
    let read_write = match context.role(from) {
        Some(SiteRole::ReadWrite) => true,
        Some(SiteRole::ReadOnly) | None => false,
    };
    (view.is_up() && view.gtid.is_some() && demoted && read_write).then(|| from.to_string())
}

/// `POST /v1/promote` for `site`, applying `drain` first within [`DRAIN_TIMEOUT`]: an
/// emergency drains everything the candidate received ([`PromoteDrain::Received`], seed 001:
/// the RPO is what had replicated, so a received but unapplied transaction is not given up),
/// a planned failover the old primary's GTID set ([`PromoteDrain::UntilGtidSet`]).
pub(super) fn promote_action(context: &Context<'_>, site: &str, drain: PromoteDrain) -> Action {
    Action::Promote {
        site: site.to_string(),
        request: PromoteRequest {
            group: context.group().to_string(),
            drain,
            timeout_ms: u64::try_from(DRAIN_TIMEOUT.as_millis()).unwrap_or(u64::MAX),
        },
    }
}

/// The old active site's own sidecar confirms MySQL read-only or down, and it caches no
/// authority naming itself (so it cannot make MySQL writable again).
pub(super) fn old_site_confirmed_unwritable(
    context: &Context<'_>,
    memory: &GroupMemory,
    from: &str,
) -> bool {
    let view = context.view(from);
    let names_itself = view.authority.as_ref().is_some_and(|authority| {
        authority.active_site.as_deref() == Some(from)
            && authority.topology_generation >= memory.topology_generation
    });
    view.confirmed_not_writable() && !names_itself
}

/// The emergency candidate: a reachable read-write site other than `from`, not failed, not
/// demoted, with no errant transactions, holding the most advanced GTID set (one containing
/// every other candidate's when there is one, else the largest; spec order breaks ties).
pub(super) fn select_candidate(
    context: &Context<'_>,
    memory: &GroupMemory,
    from: &str,
    excluded: &[&str],
) -> Option<String> {
    let candidates: Vec<(&str, &GtidSet)> = context
        .spec
        .sites
        .iter()
        .filter(|site| site.role == SiteRole::ReadWrite && site.name != from)
        .filter(|site| !excluded.contains(&site.name.as_str()))
        .filter_map(|site| {
            let name = site.name.as_str();
            let view = context.view(name);
            let entry = memory.site(name)?;
            let eligible = view.is_up()
                && entry.state == SiteState::Replica
                && entry.detection != Detection::Failed
                && entry.errant.as_ref().is_none_or(GtidSet::is_empty);
            if eligible {
                view.gtid.as_ref().map(|gtid| (name, gtid))
            } else {
                None
            }
        })
        .collect();
    let dominant = candidates.iter().find(|(_, gtid)| {
        candidates
            .iter()
            .all(|(_, other)| lost_transactions(other, gtid).is_empty())
    });
    dominant
        .or_else(|| candidates.iter().rev().max_by_key(|(_, gtid)| gtid.count()))
        .map(|(name, _)| (*name).to_string())
}

/// Issues the new authority to `to`: generation + 1, cooldown started (both copies), every
/// deploy lease revoked (`TopologyChanged`), `lastFailover` recorded, the new authority pushed
/// and every other serving site repointed (the demoted old site stays fenced).
pub(super) fn issue_promotion(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
    to: &str,
    kind: FailoverKind,
    from: &str,
) {
    let now = context.now;
    memory.topology_generation += 1;
    memory.active_site = to.to_string();
    memory.authority_issued_at = Some(now);
    let cooldown = now + context.spec.failover_cooldown.get();
    memory.cooldown_until = Some(cooldown);
    plan.tail(Action::Annotate(AnnotationChange::SetCooldownUntil(
        cooldown,
    )));
    if let Some(role) = context.role(to) {
        let node = context.view(to).node_name.clone();
        plan.transition(memory, to, role, node.as_deref(), SiteState::Active);
    }
    let lost = context
        .view(to)
        .gtid
        .as_ref()
        .and_then(|new| lost_lower_bound(context, memory, from, to, new));
    let (started_at, detected_at, fenced_at, exact) = match kind {
        FailoverKind::Emergency => {
            let failover = memory.emergency_failover.as_ref();
            (
                failover.map(|f| f.started_at),
                failover.map(|f| f.detected_at),
                failover.and_then(|f| f.fenced_at),
                false,
            )
        }
        FailoverKind::Planned => {
            let planned = memory.planned_failover.as_ref();
            (
                planned.map(|p| p.phase_since),
                None,
                planned.and_then(|p| p.fenced_at),
                true,
            )
        }
    };
    memory.last_failover = Some(LastFailover {
        kind,
        from: from.to_string(),
        to: to.to_string(),
        started_at,
        detected_at,
        fenced_at,
        promoted_at: Some(now),
        completed_at: None,
        lost_transactions: lost.as_ref().map_or(0, GtidSet::count),
        lost_gtid_set: lost.as_ref().map(ToString::to_string),
        exact,
    });
    plan.tail(Action::Annotate(AnnotationChange::SetLastFailover(
        format!("{} {from}->{to} {now}", kind_name(kind)),
    )));
    plan.cross_site(Action::RevokeDeployLeases {
        reason: RevokeReason::TopologyChanged,
        topology_generation: memory.topology_generation,
    });
    plan.event(
        EventReason::Promoted,
        format!(
            "{} failover: authority issued to {to} at topology generation {} (from {from})",
            kind_name(kind),
            memory.topology_generation
        ),
    );
}

/// The lower bound of what a promotion of `to` loses: transactions known to have committed
/// on the old active site `from` that `new` (the promoted site's set) lacks.
///
/// Known to have committed there: the old site's last observed GTID set, plus whatever a
/// direct replica of it (memory: replicating straight from the old site's internal Service,
/// no errant transactions at its last check) holds now: it received those from the old site,
/// possibly after the operator last read the old site. Ignoring them would under-report the
/// loss while the old site is unreadable. Still a lower bound: the old site may have
/// committed more that nobody received. `None` when nothing is known of the old site.
fn lost_lower_bound(
    context: &Context<'_>,
    memory: &GroupMemory,
    from: &str,
    to: &str,
    new: &GtidSet,
) -> Option<GtidSet> {
    let old_host = source_host_of(context, from);
    let namespace = &context.observation.namespace;
    let received_from_old = memory
        .sites
        .iter()
        .filter(|site| site.site != from && site.site != to)
        .filter(|site| site.state == SiteState::Replica)
        .filter(|site| site.errant.as_ref().is_some_and(GtidSet::is_empty))
        .filter(|site| {
            site.source_host
                .as_deref()
                .is_some_and(|host| same_host(host, &old_host, namespace))
        })
        .filter_map(|site| {
            context
                .view(&site.site)
                .gtid
                .clone()
                .or_else(|| site.gtid_executed.clone())
        });
    let basis = memory
        .site(from)
        .and_then(|site| site.gtid_executed.clone())
        .into_iter()
        .chain(received_from_old)
        .reduce(|all, more| all.union(&more))?;
    Some(lost_transactions(&basis, new))
}

fn kind_name(kind: FailoverKind) -> &'static str {
    match kind {
        FailoverKind::Emergency => "emergency",
        FailoverKind::Planned => "planned",
    }
}

/// Completes a promotion once the new active site is confirmed writable: `completedAt`,
/// lost transactions re-measured against the drained new primary, metrics.
pub(super) fn complete_promotion(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    let now = context.now;
    let active_gtid = context.view(&memory.active_site).gtid.clone();
    let Some(record) = memory.last_failover.as_mut() else {
        return;
    };
    if record.completed_at.is_some() {
        return;
    }
    record.completed_at = Some(now);
    if !record.exact {
        // Re-measured against the drained, detached new primary; what was already known lost
        // at promotion stays in the basis (the direct replicas that proved it may have been
        // repointed since).
        let flavor = mysql_flavor(context.spec.flavor);
        let known_lost = record
            .lost_gtid_set
            .as_deref()
            .and_then(|text| GtidSet::parse(flavor, text).ok());
        let old = memory
            .sites
            .iter()
            .find(|s| s.site == record.from)
            .and_then(|s| s.gtid_executed.clone());
        let basis = match (old, known_lost) {
            (Some(old), Some(known)) => Some(old.union(&known)),
            (old, known) => old.or(known),
        };
        if let (Some(basis), Some(new)) = (basis, active_gtid) {
            let lost = lost_transactions(&basis, &new);
            record.lost_transactions = lost.count();
            record.lost_gtid_set = Some(lost.to_string());
        }
    }
    let kind = record.kind;
    let duration = record
        .started_at
        .map(|started| now.saturating_duration_since(started))
        .unwrap_or_default();
    let lost = record.lost_transactions;
    plan.tail(Action::Metric(MetricObservation::FailoverCompleted {
        kind,
    }));
    plan.tail(Action::Metric(MetricObservation::FailoverDuration {
        kind,
        duration,
    }));
    plan.tail(Action::Metric(MetricObservation::LostTransactions {
        count: lost,
    }));
    plan.event(
        EventReason::FailoverCompleted,
        format!(
            "{} failover {}->{} completed in {:?}; lost transactions {} ({})",
            kind_name(kind),
            record.from,
            record.to,
            duration,
            lost,
            if record.exact { "exact" } else { "lower bound" }
        ),
    );
    memory.emergency_failover = None;
}

/// Returning-primary fencing: a demoted site stays `role=fenced` until it is readable, its
/// errant transactions against the active site are computed (and, for the old primary of
/// the last failover, make `lostTransactions` exact), and it has none; then it rejoins as a
/// replica (taint removed, repointed). Never reads a deploy lease.
pub(super) fn returning_primaries(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
    authority_valid: bool,
) {
    if moving(memory) {
        return;
    }
    let active = memory.active_site.clone();
    let Some(active_gtid) = context.view(&active).gtid.clone() else {
        return;
    };
    let demoted: Vec<String> = memory
        .sites
        .iter()
        .filter(|site| site.state == SiteState::Demoted)
        .map(|site| site.site.clone())
        .collect();
    for name in demoted {
        let view = context.view(&name);
        let Some(gtid) = view.gtid.clone() else {
            continue;
        };
        let errant = errant_transactions(&gtid, &active_gtid);
        let baseline = super::restore::loss_baseline(context, memory, &active_gtid);
        make_lost_exact(memory, plan, &name, &active, &gtid, &baseline);
        let previously = memory.site(&name).and_then(|site| site.errant.clone());
        if let Some(site) = memory.site_mut(&name) {
            site.errant = Some(errant.clone());
        }
        if errant.is_empty() {
            if authority_valid {
                if let Some(role) = context.role(&name) {
                    let node = view.node_name.clone();
                    plan.transition(memory, &name, role, node.as_deref(), SiteState::Replica);
                }
                plan.event(
                    EventReason::ReturningPrimaryRejoined,
                    format!("{name} has no errant transactions; rejoins as a replica of {active}"),
                );
            }
        } else if previously.as_ref() != Some(&errant) {
            plan.event(
                EventReason::ReturningPrimaryFenced,
                format!(
                    "{name} stays fenced: {} errant transactions against {active}: {errant}",
                    errant.count()
                ),
            );
        }
    }
}

fn make_lost_exact(
    memory: &mut GroupMemory,
    plan: &mut Plan,
    site: &str,
    active: &str,
    old_gtid: &GtidSet,
    new_gtid: &GtidSet,
) {
    let Some(record) = memory.last_failover.as_mut() else {
        return;
    };
    if record.from != site || record.to != active || record.completed_at.is_none() {
        return;
    }
    let lost = lost_transactions(old_gtid, new_gtid);
    let counted = record.lost_transactions;
    // Exact as of the latest reading: a thawed old primary can still commit a transaction it
    // had received before it froze (its client timed out, the commit lands after the
    // promotion). The count follows the set as it grows; it never shrinks.
    if record.exact && lost.count() <= counted {
        return;
    }
    let grew = record.exact;
    record.lost_transactions = lost.count();
    record.lost_gtid_set = Some(lost.to_string());
    record.exact = true;
    if lost.count() > counted {
        plan.tail(Action::Metric(MetricObservation::LostTransactions {
            count: lost.count() - counted,
        }));
    }
    let how = if grew {
        "committed after it was read"
    } else {
        "readable again"
    };
    plan.event(
        EventReason::LostTransactionsExact,
        format!(
            "{site} {how}: the failover lost exactly {} transactions",
            lost.count()
        ),
    );
}

/// Every-poll convergence: the move notice while a move is in flight, else the authority
/// pushed to every site and every serving replica pointed at the active site; replicas'
/// errant sets recorded while the active site is readable.
pub(super) fn converge(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    if moving(memory) {
        return;
    }
    // A sidecar caches a newer generation than memory (a move announced by a planned failover
    // this poll found stale and dropped): pushing memory's would issue a lower generation than
    // a sidecar reports. The next poll adopts or resumes what the sidecars cache.
    if memory.topology_generation < plan.generation_floor() {
        return;
    }
    let issued_at = *memory.authority_issued_at.get_or_insert(context.now);
    let authority = Authority {
        issued_at,
        ..current_authority(context, memory)
    };
    for site in context.site_names() {
        plan.cross_site(Action::PushAuthority {
            site: site.to_string(),
            authority: authority.clone(),
        });
    }
    let active = memory.active_site.clone();
    let active_gtid = context.view(&active).gtid.clone();
    for name in context.site_names() {
        let Some(entry) = memory.site(name) else {
            continue;
        };
        if name == active
            || entry.state != SiteState::Replica
            || super::restore::withholds(memory, name)
        {
            continue;
        }
        let view = context.view(name);
        if !view.is_up() {
            continue;
        }
        if let (Some(gtid), Some(active_gtid)) = (&view.gtid, &active_gtid) {
            let errant = errant_transactions(gtid, active_gtid);
            if let Some(site) = memory.site_mut(name) {
                site.errant = Some(errant);
            }
        }
        if !replicates_from(context, name, &active) {
            plan.cross_site(repoint_action(context, name, &active));
            plan.event(
                EventReason::Repointed,
                format!("{name} replicates from {active}"),
            );
        }
    }
}
