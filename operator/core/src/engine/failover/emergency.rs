//! Emergency failover: started when the active site is `Failed` (or made read-only by the
//! spec), then advanced one phase a poll: the lease wait (`AwaitingLeaseExpiry`), the
//! candidate's catch-up from a site holding more of the old site's transactions
//! (`CatchingUp`), the drain and detachment (`Draining`), and the promotion. Also the
//! candidate it promotes and the evidence that the old site can no longer write.

use bloodraven_api::{sidecar::PromoteDrain, FailoverKind, PlannedFailoverPhase, SiteRole};
use bloodraven_mysql::{lost_transactions, GtidSet};

use super::authority::{announce_move, cooldown_until, moving};
use super::convergence::{catch_up_action, replicates_from};
use super::promotion::{issue_promotion, promote_action};
use crate::engine::action::{Action, AnnotationChange, EventReason};
use crate::engine::agentless::{kill_agentless_old_primary, promotion_held, OldAgent};
use crate::engine::lease_wait::{lease_wait, terms_differ_from_spec, LeaseWait};
use crate::engine::memory::{Detection, EmergencyFailover, EmergencyPhase, GroupMemory, SiteState};
use crate::engine::options::DRAIN_POLLS_MAX;
use crate::engine::plan::{Context, Plan};
use crate::time::Timestamp;

/// The emergency failover rule: starts one when the active site is `Failed` (the cooldown
/// gates it; a deploy hold is never read), and advances one in flight.
pub(in crate::engine) fn emergency_step(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
) {
    abandon_failed_promotion(memory);
    if memory.emergency_failover.is_none() {
        take_over_failed_planned_drain(context, memory, plan);
    }
    if memory.emergency_failover.is_none() {
        resume_lost_emergency(context, memory, plan);
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
    match &failover.phase {
        EmergencyPhase::AwaitingLeaseExpiry => {
            await_lease_expiry(context, memory, plan, &failover, agent);
        }
        EmergencyPhase::CatchingUp { to, source, polls } => {
            catch_up(context, memory, plan, &failover, to, source, *polls);
        }
        EmergencyPhase::Draining { to, polls } => {
            drain(context, memory, plan, &failover, to, *polls);
        }
        EmergencyPhase::Promoting { .. } => {}
    }
}

/// `AwaitingLeaseExpiry`: the move notice is (re)sent, and the drain starts once the old
/// site is confirmed unwritable or a majority of every site set's sidecars stopped granting
/// it a lease (or the test-only switch skips the wait).
fn await_lease_expiry(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
    failover: &EmergencyFailover,
    agent: OldAgent<'_>,
) {
    announce_move(context, memory, plan, failover.announced_at);
    let confirmed =
        !failover.holder_unknown && old_site_confirmed_unwritable(context, memory, &failover.from);
    let wait = lease_wait(context, memory);
    let skipped = context.options.unsafe_skip_lease_wait;
    let lapsed = wait.lapsed();
    if lapsed && !confirmed && !skipped {
        if let Some(why) = promotion_held(context, failover, agent, plan) {
            plan.event(EventReason::AwaitingLeaseExpiry, why);
            return;
        }
    }
    if !(confirmed || lapsed || skipped) {
        report_lease_wait(context, &wait, plan);
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

/// The events of a lease wait that goes on: what it waits for, and whether the sidecars run
/// with other lease terms than the spec.
fn report_lease_wait(context: &Context<'_>, wait: &LeaseWait, plan: &mut Plan) {
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
}

/// `CatchingUp`: the candidate `to` replicates from `source` until it lacks none of its
/// transactions; it drains once caught up, or without them when either site is down or
/// [`DRAIN_POLLS_MAX`] polls have passed.
fn catch_up(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
    failover: &EmergencyFailover,
    to: &str,
    source: &str,
    polls: u32,
) {
    announce_move(context, memory, plan, failover.announced_at);
    let missing = missing_from(context, source, to);
    let caught_up = missing == Some(0);
    let gave_up =
        !context.view(to).is_up() || !context.view(source).is_up() || polls >= DRAIN_POLLS_MAX;
    if caught_up || gave_up {
        if !caught_up {
            plan.event(
                EventReason::CatchingUp,
                format!(
                    "{to} did not catch up with {source} within {polls} polls; promoting it without {source}'s extra transactions"
                ),
            );
        }
        drain_candidate(context, memory, plan, to);
        return;
    }
    if let Some(failover) = memory.emergency_failover.as_mut() {
        failover.phase = EmergencyPhase::CatchingUp {
            to: to.to_string(),
            source: source.to_string(),
            polls: polls + 1,
        };
    }
    if !replicates_from(context, to, source) {
        plan.cross_site(catch_up_action(context, to, source));
    }
}

/// `Draining`: the new authority is issued once the candidate `to` is observed detached;
/// until then the `Promote` is repeated, and another candidate is picked when `to` is lost
/// (down, failed, or not detached within [`DRAIN_POLLS_MAX`] polls).
fn drain(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
    failover: &EmergencyFailover,
    to: &str,
    polls: u32,
) {
    let view = context.view(to);
    if view.detached() {
        issue_promotion(
            context,
            memory,
            plan,
            to,
            FailoverKind::Emergency,
            &failover.from,
        );
        if let Some(failover) = memory.emergency_failover.as_mut() {
            failover.phase = EmergencyPhase::Promoting { to: to.to_string() };
        }
        return;
    }
    announce_move(context, memory, plan, failover.announced_at);
    let candidate_lost = !view.is_up()
        || memory
            .site(to)
            .is_some_and(|s| s.detection == Detection::Failed)
        || polls >= DRAIN_POLLS_MAX;
    if candidate_lost {
        start_draining(
            context,
            memory,
            plan,
            &failover.from,
            failover.fenced_at,
            &[to],
        );
    } else {
        if let Some(failover) = memory.emergency_failover.as_mut() {
            failover.phase = EmergencyPhase::Draining {
                to: to.to_string(),
                polls: polls + 1,
            };
        }
        plan.cross_site(promote_action(context, to, PromoteDrain::Received));
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
/// admitted and no promotion happened since; a deploy hold is never read
/// (docs/design/requirements.md R003.18).
///
/// [`PLANNED_DRAIN_TIMEOUT`]: crate::engine::options::PLANNED_DRAIN_TIMEOUT
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
            crate::engine::planned::end(
                planned,
                plan,
                EventReason::PlannedFailoverAborted,
                message,
            );
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

/// An active site memory holds `Demoted` with no move in flight: only a move demotes the
/// active site, and the one that did is lost. An emergency failover is volatile memory, but the
/// site it demoted is `role=fenced` in the status, so an operator restart reads it back demoted
/// (a planned drain taken over by an emergency included: the planned failover is over in the
/// status); no sidecar that answers caches its move notice, or `adopt_newer_authority` would
/// have resumed it. Left alone, no failover ever starts from that site (it is not `Active`) and,
/// once readable, it would rejoin as a replica of itself (simulator seed 2928 with
/// `--all-faults --restore --image-update`). The emergency resumes at the lease wait, which
/// re-sends the notice and still ends on evidence only. The cooldown was checked when the move
/// began; a deploy hold is never read (docs/design/requirements.md R003.18).
fn resume_lost_emergency(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    if moving(memory) || memory.topology_generation == 0 {
        return;
    }
    let from = memory.active_site.clone();
    let Some(site) = memory.site(&from) else {
        return;
    };
    if site.state != SiteState::Demoted {
        return;
    }
    // Only on evidence that memory is current: a sidecar that answers caches memory's own
    // authority. A status reverted to a snapshot taken while an older move was in flight also
    // reads back a demoted active site; resuming that move without evidence would issue a
    // generation another site may hold (simulator seed 298 with `--status-revert`: pdx
    // re-promoted at the generation iad held). Without it, the unvouched rule decides.
    let vouched = context.views.values().any(|view| {
        view.sidecar_up
            && view.authority.as_ref().is_some_and(|authority| {
                authority.topology_generation == memory.topology_generation
                    && authority.active_site.as_deref() == Some(from.as_str())
            })
    });
    if !vouched {
        return;
    }
    let started_at = site.failing_since.unwrap_or(context.now);
    let detected_at = site.failed_at.unwrap_or(context.now);
    memory.emergency_failover = Some(EmergencyFailover {
        from: from.clone(),
        phase: EmergencyPhase::AwaitingLeaseExpiry,
        announced_at: context.now,
        started_at,
        detected_at,
        fenced_at: None,
        holder_unknown: false,
    });
    plan.event(
        EventReason::EmergencyFailoverStarted,
        format!(
            "active site {from} is demoted with no authority move in memory (a restart lost the failover that demoted it); authority move announced again"
        ),
    );
}

/// Starts an emergency failover away from an active site that is `Failed` or read-only in the
/// spec, unless the cooldown or the lack of a candidate holds it back: the move is announced
/// and the old site demoted.
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
    if emergency_held_back(context, memory, plan, &from, just_failed) {
        return;
    }
    abandon_planned_promotion(memory, plan, &from);
    memory.emergency_failover = Some(EmergencyFailover {
        from: from.clone(),
        phase: EmergencyPhase::AwaitingLeaseExpiry,
        announced_at: context.now,
        started_at,
        detected_at,
        fenced_at: None,
        holder_unknown: false,
    });
    plan.transition_site(context, memory, &from, SiteState::Demoted);
    plan.event(
        EventReason::EmergencyFailoverStarted,
        if read_only_by_spec {
            format!("active site {from} is read-only in the spec; authority move announced")
        } else {
            format!("active site {from} failed; authority move announced")
        },
    );
}

/// Whether the failover away from `from` must not start this poll: inside the cooldown, or
/// with no candidate. Says why on the poll the site failed.
fn emergency_held_back(
    context: &Context<'_>,
    memory: &GroupMemory,
    plan: &mut Plan,
    from: &str,
    just_failed: bool,
) -> bool {
    if let Some(until) = cooldown_until(context, memory) {
        if context.now < until {
            if just_failed {
                plan.event(
                    EventReason::EmergencyFailoverBlockedByCooldown,
                    format!("active site {from} failed inside the cooldown (until {until}); no failover"),
                );
            }
            return true;
        }
    }
    if select_candidate(context, memory, from, &[]).is_none() {
        if just_failed {
            plan.event(
                EventReason::NoFailoverCandidate,
                format!("active site {from} failed and no read-write site qualifies as candidate"),
            );
        }
        return true;
    }
    false
}

/// A planned failover waiting for admission yields to the emergency and is re-admitted
/// afterwards (against the new active site and the new cooldown). One whose target was
/// promoted and failed before it was confirmed writable is over: the emergency replaces it.
fn abandon_planned_promotion(memory: &mut GroupMemory, plan: &mut Plan, from: &str) {
    if let Some(planned) = memory.planned_failover.as_mut() {
        match planned.phase {
            PlannedFailoverPhase::Promoting => {
                let message = format!(
                    "planned failover {} -> {} abandoned: {from} failed before it was confirmed writable; emergency failover takes over",
                    planned.from, planned.target
                );
                crate::engine::planned::end(
                    planned,
                    plan,
                    EventReason::PlannedFailoverAborted,
                    message,
                );
            }
            PlannedFailoverPhase::Admitting
            | PlannedFailoverPhase::Deferred
            | PlannedFailoverPhase::Draining
            | PlannedFailoverPhase::Completed
            | PlannedFailoverPhase::Rejected => {}
        }
    }
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
            plan.cross_site(catch_up_action(context, &to, &source));
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
///
/// Only a replica whose transactions are `from`'s history is a source, as only such a site
/// is a candidate: not one awaiting its re-seed after a restore (it holds what the restore
/// discarded, under numbers the restored site reuses), nor one with errant transactions.
/// Simulator seed 167 with every fault mode (`ErrantSiteUsed`): pdx was caught up from the
/// reader awaiting its re-seed and promoted holding the writes the restore of iad had
/// discarded, which iad's history since lacked.
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
                    entry.state == SiteState::Replica
                        && entry.detection != Detection::Failed
                        && entry.errant.as_ref().is_none_or(GtidSet::is_empty)
                        && !crate::engine::restore::withholds(memory, name)
                        && !crate::engine::rejoin::holds_record(entry)
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

/// The old active site's own sidecar confirms MySQL read-only or down, and it caches no
/// authority naming itself (so it cannot make MySQL writable again).
pub(in crate::engine) fn old_site_confirmed_unwritable(
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
/// demoted, not awaiting a restore's re-seed, with no errant transactions, holding the most advanced GTID set (one containing
/// every other candidate's when there is one, else the largest; spec order breaks ties).
fn select_candidate(
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
            // A site awaiting its re-seed after a restore holds what the restore discarded,
            // under GTIDs the restored site reuses: "no errant transactions" proves nothing
            // of it, and promoting it would bring the discarded writes back and drop the ones
            // taken since.
            let eligible = view.is_up()
                && entry.state == SiteState::Replica
                && entry.detection != Detection::Failed
                && entry.errant.as_ref().is_none_or(GtidSet::is_empty)
                && !crate::engine::restore::withholds(memory, name)
                && !crate::engine::rejoin::holds_record(entry);
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
