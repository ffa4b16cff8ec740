//! Per-site bookkeeping of one poll: failure detection with `failureThreshold` and the
//! detection floor, the status mirror, mysqld restarts, and adoption of a newer authority
//! the sidecars cache than memory knows.

use super::action::EventReason;
use super::failover::{moving, notice_generation};
use super::memory::{
    Detection, EmergencyFailover, EmergencyPhase, GroupMemory, PlannedFailover, SiteState,
};
use super::note::{FailoverNote, NoteSignature, PromotionKind};
use super::plan::{Context, Plan};
use super::MYSQLD_START_JITTER;
use crate::time::Timestamp;
use bloodraven_api::{names, PlannedFailoverPhase};
use bloodraven_mysql::GtidSet;

/// A failure streak may fall short of the detection floor by `pollInterval /
/// POLL_JITTER_TOLERANCE` (a quarter poll) and still count as spanning it: real polls'
/// readings land milliseconds early or late. Polls faster than the spec's rate still cannot
/// detect faster by more than that quarter.
pub const POLL_JITTER_TOLERANCE: u32 = 4;

/// Updates every site's detection state and status mirror from this poll's reading.
///
/// A poll fails for a site when its sidecar does not answer or its MySQL is down; for the
/// active site, once its authority has had a detection floor to take effect and no move is
/// in flight, also when it is not writable (a read-only active site is a write outage, e.g. a
/// primary that lost its lease majority and fenced itself). A site is `Failed` after
/// `failureThreshold` consecutive failed polls whose streak spans the detection floor
/// (`pollInterval × failureThreshold`), so faster polling cannot detect faster. The span
/// is judged with a quarter poll interval to spare ([`POLL_JITTER_TOLERANCE`]): a fixed-rate poller's
/// readings land a few milliseconds early or late, and `failureThreshold` polls taken at the
/// spec's rate must detect at the last of them, not one poll later.
pub(super) fn observe_sites(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    let now = context.now;
    // Streaks are timed on the reads, not on when they ended (a timed-out read ends a round
    // trip budget late, an instant refusal does not: s026 detected a poll late on that).
    let read_at = context.observation.polled_at.unwrap_or(now).min(now);
    let floor = context.spec.detection_floor();
    let poll_interval = context.spec.poll_interval.get();
    let threshold = context.spec.failure_threshold.max(1);
    let moving =
        memory.emergency_failover.is_some() || super::restore::holds_fenced(memory).is_some();
    let authority_settled = memory
        .authority_issued_at
        .is_some_and(|issued| now.saturating_duration_since(issued) >= floor);
    let active_site = memory.active_site.clone();
    for name in context.site_names() {
        let view = context.view(name);
        let Some(site) = memory.site_mut(name) else {
            continue;
        };
        let is_active = name == active_site && site.state == SiteState::Active;
        let judged_on_writability = is_active && !moving && authority_settled;
        let failed_poll = !view.is_up() || (judged_on_writability && !view.is_writable());
        if failed_poll {
            site.consecutive_failures = site.consecutive_failures.saturating_add(1);
            let since = *site.failing_since.get_or_insert(read_at);
            let streak = read_at.saturating_duration_since(since)
                + poll_interval
                + poll_interval / POLL_JITTER_TOLERANCE;
            match site.detection {
                Detection::Failed => {}
                Detection::Up | Detection::Suspect => {
                    if site.consecutive_failures >= threshold && streak >= floor {
                        site.detection = Detection::Failed;
                        site.failed_at = Some(now);
                        plan.event(
                            EventReason::SiteFailed,
                            format!(
                                "site {name} failed {} consecutive polls (detection floor {:?})",
                                site.consecutive_failures, floor
                            ),
                        );
                    } else {
                        site.detection = Detection::Suspect;
                    }
                }
            }
        } else {
            match site.detection {
                Detection::Failed => plan.event(
                    EventReason::SiteRecovered,
                    format!(
                        "site {name} answers again after {} failed polls",
                        site.consecutive_failures
                    ),
                ),
                Detection::Up | Detection::Suspect => {}
            }
            site.detection = Detection::Up;
            site.consecutive_failures = 0;
            site.failing_since = None;
            site.failed_at = None;
        }
        site.reachable = view.is_up();
        if view.is_up() {
            site.last_seen = Some(now);
        }
        if view.sidecar_up {
            site.sidecar_unreachable_since = None;
        } else {
            site.sidecar_unreachable_since.get_or_insert(read_at);
        }
        if view.sidecar_up {
            site.writable = view.is_writable();
            site.fenced = view.fenced;
            site.replicating = view.replicating();
            site.source_host = view
                .replication
                .as_ref()
                .and_then(|r| r.source_host.clone());
            site.seconds_behind_source = view
                .replication
                .as_ref()
                .and_then(|r| r.seconds_behind_source);
        }
        if let Some(gtid) = &view.gtid {
            site.gtid_executed = Some(gtid.clone());
        }
        if let Some(error) = &view.gtid_error {
            plan.event(
                EventReason::GtidUnreadable,
                format!("read GTID set of site {name}: {error}"),
            );
        }
        if let Some(started_at) = view.mysqld_started_at {
            let restarted = site
                .mysqld_started_at
                .is_some_and(|previous| started_at > previous + MYSQLD_START_JITTER);
            if restarted && is_active && !moving {
                plan.event(
                    EventReason::PrimaryReasserted,
                    format!(
                        "mysqld of active site {name} restarted; authority re-issued, no failover"
                    ),
                );
            }
            site.mysqld_started_at = Some(started_at);
        }
    }
}

/// Adopts the failover the `last-failover` annotation names ([`FailoverNote`]) when it issued
/// a generation above memory's: the status that recorded it was lost (reverted to an older
/// copy, or its write failed while the annotation's succeeded) and memory resumed from before
/// it. The note is the operator's own record of that promotion, so memory takes it as the
/// authority it issued: the note's site at the note's generation, issued at its `promotedAt`,
/// with the cooldown that promotion started. Going on from the reverted status instead
/// re-ran a failover that had already happened (simulator seed 131 with `--all-faults
/// --state-loss --status-revert`: the reverted status still drained pdx for a planned
/// failover to iad that the note shows promoted, and an emergency failover re-issued iad's
/// generation, a failover the status history cannot explain), or withheld the reverted
/// authority from a site lacking what the note's site wrote since, for good (seed 298: no
/// writable site after the faults healed).
///
/// A newer authority the sidecars cache is adopted after this
/// ([`adopt_newer_authority`]), so nothing issued from here on is below one they know. A note
/// naming a site no longer in the spec only raises the floor of what is issued
/// (`unadopted_generation`). A malformed note is reported (`AnnotationUnreadable`) and
/// ignored; so is a newer note whose signature the shell did not verify with the group's
/// operator key (`AnnotationUnverified`): anyone allowed to annotate the group could have
/// written it, and adopting it would make its site active without a GTID comparison. An
/// unverified note no newer than memory is ignored silently (it changes nothing).
pub(super) fn adopt_noted_failover(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
) {
    let reading = match &context.observation.annotations.last_failover {
        None => return,
        Some(Err(error)) => {
            plan.event(EventReason::AnnotationUnreadable, error.to_string());
            return;
        }
        Some(Ok(reading)) => reading,
    };
    let note = &reading.note;
    let generation = note.topology_generation;
    if generation <= memory.topology_generation {
        return;
    }
    if let NoteSignature::Rejected(why) = &reading.signature {
        plan.event(
            EventReason::AnnotationUnverified,
            format!(
                "annotation {} names {} at generation {generation}, newer than memory's {} ({} active), but {why}; not adopted: only a note signed with the group's operator key is",
                names::ANNOTATION_LAST_FAILOVER,
                note.describe(),
                memory.topology_generation,
                memory.active_site,
            ),
        );
        return;
    }
    if context.spec.site(&note.to).is_none() {
        memory.unadopted_generation = memory.unadopted_generation.max(generation);
        return;
    }
    let previous = memory.active_site.clone();
    let previous_generation = memory.topology_generation;
    settle_planned_with_note(memory, plan, note);
    adopt_authority(
        context,
        memory,
        plan,
        &note.to,
        generation,
        note.promoted_at,
    );
    rejoin_drained_site(context, memory, plan, note);
    super::restore::rebuild_from_note(context, memory, plan, note);
    // A failover started the cooldown; a restore's re-promotion did not.
    let implied_cooldown = match note.kind {
        PromotionKind::Emergency | PromotionKind::Planned => {
            Some(note.promoted_at + context.spec.failover_cooldown.get())
        }
        PromotionKind::Restore => None,
    };
    if let Some(implied) = implied_cooldown {
        if memory.cooldown_until.is_none_or(|until| until < implied) {
            memory.cooldown_until = Some(implied);
        }
    }
    plan.event(
        EventReason::AuthorityAdopted,
        format!(
            "annotation {} names {} at generation {generation}, newer than memory's {previous_generation} ({previous} active); adopted",
            names::ANNOTATION_LAST_FAILOVER,
            note.describe(),
        ),
    );
}

/// A planned failover memory still drains (or promotes) when a note newer than memory is
/// adopted: the note's own planned failover is `Promoting` (its promotion was issued; it
/// completes once the note's site is confirmed writable); any other is stale and aborted.
fn settle_planned_with_note(memory: &mut GroupMemory, plan: &mut Plan, note: &FailoverNote) {
    let Some(planned) = draining_or_promoting(memory) else {
        return;
    };
    let same = match note.kind {
        PromotionKind::Planned => planned.from == note.from && planned.target == note.to,
        PromotionKind::Emergency | PromotionKind::Restore => false,
    };
    if same {
        planned.phase = PlannedFailoverPhase::Promoting;
        planned.phase_since = note.promoted_at;
        return;
    }
    let message = format!(
        "planned failover {} -> {} dropped: annotation {} names {} at generation {}, newer",
        planned.from,
        planned.target,
        names::ANNOTATION_LAST_FAILOVER,
        note.describe(),
        note.topology_generation
    );
    super::planned::end(planned, plan, EventReason::PlannedFailoverAborted, message);
}

/// The site a noted planned failover drained is a replica again: a planned promotion is
/// issued only once its target holds every transaction of the fenced old site, so that site
/// has nothing the new history lacks. Memory's `Demoted` for it is the drain the reverted
/// status still shows (the rejoin after it was lost with the rest); kept, it would be no
/// failover candidate, and a later failover from the note's site would find none (a move
/// notice the sidecars cache, docs/design/history.md#issue-10-case-7). Unless memory recorded
/// errant transactions of it. An emergency failover's old site stays demoted: what it wrote
/// last is unknown.
fn rejoin_drained_site(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
    note: &FailoverNote,
) {
    match note.kind {
        PromotionKind::Planned => {}
        PromotionKind::Emergency | PromotionKind::Restore => return,
    }
    // A site a rejoin holds (`engine::rejoin`) is made a replica only by that rejoin.
    let drained = memory.site(&note.from).is_some_and(|site| {
        site.state == SiteState::Demoted
            && site.errant.as_ref().is_none_or(GtidSet::is_empty)
            && !super::rejoin::holds_record(site)
    });
    if !drained || note.from == note.to {
        return;
    }
    plan.transition_site(context, memory, &note.from, SiteState::Replica);
}

/// Memory takes the authority `(site, generation)` issued at `issued_at` that it lost: `site`
/// is active, every other site memory held active is demoted (it rejoins as a replica only
/// with no errant transactions), and any emergency failover memory had in flight is over.
fn adopt_authority(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
    site: &str,
    generation: u64,
    issued_at: Timestamp,
) {
    memory.take_generation(generation);
    memory.active_site = site.to_string();
    memory.authority_issued_at = Some(issued_at);
    memory.emergency_failover = None;
    for name in context.site_names() {
        let state = memory.site(name).map(|s| s.state);
        let to = if name == site {
            SiteState::Active
        } else {
            match state {
                Some(SiteState::Active) => SiteState::Demoted,
                Some(other) => other,
                None => continue,
            }
        };
        plan.transition_site(context, memory, name, to);
    }
}

/// Adopts the newest authority the sidecars cache when memory is behind it (a status write
/// that failed after a promotion, or memory lost with the operator), and recovers an
/// emergency failover whose move notice the sidecars cache but memory forgot.
///
/// A newer authority naming a site also restores the cooldown it implies
/// (`issuedAt + failoverCooldown`): the sidecars are a third copy of the promotion time, so
/// `CooldownViolated(restart+stateLost)` needs status, annotation *and* every sidecar's cache
/// lost.
pub(super) fn adopt_newer_authority(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
) {
    // What a sidecar forgot when its mysqld restarted is still what the operator issued.
    let newest = context
        .views
        .values()
        .flat_map(|view| view.authority.iter().chain(&view.latest_authority))
        .max_by_key(|authority| {
            (
                authority.topology_generation,
                authority.active_site.is_some(),
            )
        })
        .cloned();
    let cached_max = newest
        .as_ref()
        .map_or(0, |authority| authority.topology_generation);
    if let Some(known) = context
        .views
        .values()
        .filter_map(|view| view.known_generation)
        .max()
    {
        if known > cached_max && known > memory.topology_generation.max(memory.unadopted_generation)
        {
            recover_unknown_generation(context, memory, plan, known);
            return;
        }
    }
    let Some(newest) = newest else {
        return;
    };
    if newest.topology_generation < memory.topology_generation {
        return;
    }
    match &newest.active_site {
        Some(site) if newest.topology_generation > memory.topology_generation => {
            if context.spec.site(site).is_none() {
                // A site no longer in the spec: its generation is taken all the same, so
                // nothing issued from here on is lower than what a sidecar caches.
                memory.take_generation(newest.topology_generation);
                return;
            }
            let previous = memory.active_site.clone();
            adopt_authority(
                context,
                memory,
                plan,
                site,
                newest.topology_generation,
                newest.issued_at,
            );
            let implied_cooldown = newest.issued_at + context.spec.failover_cooldown.get();
            if memory
                .cooldown_until
                .is_none_or(|until| until < implied_cooldown)
                && previous != *site
            {
                memory.cooldown_until = Some(implied_cooldown);
            }
            plan.event(
                EventReason::AuthorityAdopted,
                format!(
                    "sidecars cache authority {site} at generation {}, newer than memory ({previous}); adopted",
                    newest.topology_generation
                ),
            );
        }
        Some(site)
            if newest.topology_generation == memory.topology_generation
                && *site == memory.active_site
                && memory.authority_issued_at.is_none() =>
        {
            // After a restart: keep pushing the issuedAt the sidecars already hold.
            memory.authority_issued_at = Some(newest.issued_at);
        }
        Some(_) => {}
        None if newest.topology_generation > memory.topology_generation => {
            // A move memory knows of is in flight and this is its notice: nothing lost.
            let in_flight = moving(memory) || memory.emergency_failover.is_some();
            if in_flight && notice_generation(memory) >= newest.topology_generation {
                return;
            }
            // Memory lost a move (or is behind the one in flight: a reverted status still
            // holding an older planned drain). Whatever it had in flight is stale; going on
            // with it would issue a generation lower than a sidecar caches (a planned
            // abort re-asserting its old site, seed 145 with --status-revert).
            drop_stale_planned(memory, plan, newest.topology_generation);
            // The generation before the notice's was issued to a site memory cannot name:
            // nothing is issued at or below it, and memory keeps naming what it did issue
            // (claiming its own site at that generation would be a status no history explains).
            memory.unadopted_generation = memory
                .unadopted_generation
                .max(newest.topology_generation - 1);
            // The notice names the site the move is away from (operators that predate the
            // field: memory's active site).
            let moving_from = newest
                .moving_from
                .as_deref()
                .filter(|site| context.spec.site(site).is_some());
            let from = start_lost_move(context, memory, plan, moving_from);
            plan.event(
                EventReason::AuthorityAdopted,
                format!(
                    "sidecars cache an authority move to generation {} that memory lost; resuming the emergency failover from {from}",
                    newest.topology_generation
                ),
            );
        }
        None => {}
    }
}

/// A sidecar knows generation `known` was issued (a peer asked a lease for it or answered
/// with it), above memory's and above every authority the answering sidecars cache: memory
/// lost that move (a reverted status) and no sidecar that answers holds its record, so
/// neither its site nor its cooldown can be adopted. Re-issuing memory's own generation would
/// collide with it (two authorities of one generation naming different sites; simulator seed
/// 496 `--state-loss --status-revert`). Memory takes `known` as its generation, and an
/// emergency failover from memory's active site issues the next authority above it, to the
/// candidate the usual rules choose once the leases have lapsed.
fn recover_unknown_generation(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
    known: u64,
) {
    let in_flight = moving(memory) || memory.emergency_failover.is_some();
    if in_flight && notice_generation(memory) >= known {
        return;
    }
    let previous = memory.topology_generation;
    drop_stale_planned(memory, plan, known);
    // Memory keeps naming the authority it issued (its status claims nothing about `known`,
    // whose holder is unknown: simulator seed 0 with `--status-revert` published the old
    // active site at `known`); nothing is issued at or below `known`.
    memory.unadopted_generation = known;
    let from = start_lost_move(context, memory, plan, None);
    if let Some(failover) = memory.emergency_failover.as_mut() {
        failover.holder_unknown = true;
    }
    plan.event(
        EventReason::AuthorityAdopted,
        format!(
            "a sidecar knows topology generation {known}, issued after memory's {previous} and cached by no sidecar that answers; an emergency failover from {from} issues authority above it"
        ),
    );
}

/// Starts an emergency failover for a move memory lost, from `moving_from` (the site the
/// cached move notice names) or else memory's active site; returns that site.
fn start_lost_move(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
    moving_from: Option<&str>,
) -> String {
    if let Some(site) = moving_from.filter(|site| *site != memory.active_site) {
        // Memory's site did not hold the authority the move is away from: it is no longer
        // taken for the active one, `site` is. Memory's states are from before that move (a
        // planned drain that demoted it, say): unless memory recorded errant transactions of
        // it, it is a replica again, and a candidate by the usual GTID rules.
        let previous = std::mem::replace(&mut memory.active_site, site.to_string());
        let stale = memory
            .site(&previous)
            .is_some_and(|entry| match entry.state {
                SiteState::Active => true,
                SiteState::Demoted => {
                    entry.errant.as_ref().is_none_or(GtidSet::is_empty)
                        && !super::rejoin::holds_record(entry)
                }
                SiteState::Replica => false,
            });
        if stale {
            plan.transition_site(context, memory, &previous, SiteState::Replica);
        }
    }
    let from = memory.active_site.clone();
    let started = memory
        .site(&from)
        .and_then(|site| site.failing_since)
        .unwrap_or(context.now);
    memory.emergency_failover = Some(EmergencyFailover {
        from: from.clone(),
        phase: EmergencyPhase::AwaitingLeaseExpiry,
        announced_at: context.now,
        started_at: started,
        detected_at: context.now,
        fenced_at: None,
        holder_unknown: false,
    });
    plan.transition_site(context, memory, &from, SiteState::Demoted);
    from
}

/// A planned failover in `Draining` or `Promoting` under an older generation than the move
/// notice the sidecars cache is stale: it is rejected (and its annotation cleared) without
/// touching the authority.
fn drop_stale_planned(memory: &mut GroupMemory, plan: &mut Plan, notice_generation: u64) {
    let Some(planned) = draining_or_promoting(memory) else {
        return;
    };
    let message = format!(
        "planned failover {} -> {} dropped: the sidecars cache an authority move to generation {notice_generation}, newer than memory's",
        planned.from, planned.target
    );
    super::planned::end(planned, plan, EventReason::PlannedFailoverAborted, message);
}

/// The planned failover memory has in `Draining` or `Promoting`: one whose fence or promotion
/// was issued, which a newer authority record supersedes.
fn draining_or_promoting(memory: &mut GroupMemory) -> Option<&mut PlannedFailover> {
    memory.planned_failover.as_mut().filter(|planned| {
        matches!(
            planned.phase,
            PlannedFailoverPhase::Draining | PlannedFailoverPhase::Promoting
        )
    })
}
