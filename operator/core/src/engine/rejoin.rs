//! Rejoin of a fenced returning primary (docs/design/operator.md#returning-primary; issue 35).
//!
//! A demoted old primary that holds errant transactions (GTIDs the active site lacks: writes
//! an emergency failover lost) stays `role=fenced` by the returning-primary rule. The
//! annotation `bloodraven.shipstream.io/rejoin=<site>` (`kubectl bloodraven rejoin <group>
//! <site>`), or `spec.returningPrimary.onErrant: rejoin` once such a site is readable, brings
//! it back without throwing a transaction away unless an archive names it:
//!
//! 1. **Requested** (or **Deferred**): refused, saying why, when the site is the active site,
//!    is not fenced (not demoted), is not readable, or holds no errant transactions; when the
//!    group has no valid authority; or when a failover, a restore in place, an ordered update
//!    or another rejoin is in flight or requested. A live failover-hold defers it
//!    (`deferReason: DeploymentHold`, `retryTime` the earliest hold expiry), as it defers the
//!    other planned disruptions (docs/design/requirements.md R003.17); once the hold is gone
//!    it is validated again.
//! 2. **Archiving**: the site is fenced explicitly (`Fence`, at the current generation: only a
//!    greater one lifts it) and, once its sidecar reports the fence in force and mysqld
//!    read-only, asked for the archive (`Archive`, `POST /v1/archive`) named
//!    `rejoin-<site>-<rejoin id>` with the errant GTID set core computed against the active
//!    site: its sidecar writes the errant transactions' binlog events and a full dump under
//!    `archives/<name>/` on its backups volume, `manifest.json` last. A job that fails stops
//!    the rejoin (`Failed`): the site stays fenced, as it was.
//! 3. **Reseeding**: the site is re-seeded from the active site with restore-in-place's
//!    machinery (`POST /v1/reseed` under the rejoin id: `restore::advance_reseed`), which
//!    replaces its data with a dump of the active site and points its replication there.
//! 4. **Completed**: once its sidecar reports the re-seed done, the site holds no
//!    transaction the active site lacks and replicates directly from it (it is repointed if it
//!    does not), it becomes a replica again (`role=replica`, untainted, an emergency candidate
//!    again) in one decision, under a valid authority.
//!
//! The site stays `SiteState::Demoted` (`role=fenced`, in no shared Service, never a
//! candidate) through every step: the plain returning-primary rule (no errant transactions:
//! rejoin) does not apply to a site a rejoin holds ([`holds`]): archiving, re-seeding, past
//! its archive and not rejoined (a re-seed that failed may have loaded part of a dump), or
//! whose sidecar reports an archive or re-seed job running. A rejoin requested again after
//! one that failed past its archive re-uses that archive when it holds every errant
//! transaction the site holds now.
//!
//! A failover that moves the active site while a rejoin archives or re-seeds stops it
//! (`Failed`, the site fenced, the archive kept). `status.sites[].rejoin` is the rejoin's
//! memory: a restarted operator resumes it in its phase (the archive and re-seed requests are
//! idempotent, a re-seed reported under the rejoin's id means the archive was complete), and
//! `role=fenced` read back keeps the site demoted meanwhile.
//!
//! With `onErrant: rejoin` the operator starts the rejoin itself for a demoted site with
//! errant transactions once it is readable and nothing above would refuse it; it does not
//! start again by itself after one of its rejoins failed or was refused (a human decides,
//! with `kubectl bloodraven rejoin`).

use bloodraven_api::{
    names,
    sidecar::{backup_name_problem, ArchiveRequest, FenceRequest, JobKind, JobState},
    Admission, OnErrant, PlannedFailoverPhase, RejoinPhase, RejoinStatus,
};
use bloodraven_mysql::{errant_transactions, GtidSet};

use super::action::{Action, AnnotationChange, EventReason};
use super::failover::{errant_of, moving, replicates_from, repoint_action};
use super::gate::GatedStart;
use super::memory::{GroupMemory, SiteMemory, SiteState};
use super::plan::{Context, Plan};
use super::reading::mysql_flavor;
use super::restore::{advance_reseed, job_of, reseed_request_from, status_of, ReseedProgress};
use crate::deploy::DisruptionKind;
use crate::time::{Duration, Timestamp};

/// How long `Archiving` may take (the sidecar's archive job, or its answer at all: it refuses
/// an archive without a backups volume, without the fence in force, or when the site does not
/// hold every errant transaction) before the rejoin fails, the site still fenced.
pub const REJOIN_ARCHIVE_TIMEOUT: Duration = Duration::from_secs(1800);
/// How long `Reseeding` may take (the re-seed job, then the site seen replicating directly
/// from the active site) before the rejoin fails, the site still fenced.
pub const REJOIN_RESEED_TIMEOUT: Duration = Duration::from_secs(1800);

/// `status.sites[].rejoin` plus what `decide` needs besides it.
#[derive(Clone, Debug, PartialEq)]
pub struct RejoinMemory {
    /// The persisted status.
    pub status: RejoinStatus,
    /// Whether, after a final phase, a poll saw the annotation not naming this site (until
    /// then the same annotation is the request already handled, not a new one). *Volatile*.
    pub annotation_cleared: bool,
}

impl RejoinMemory {
    /// The memory a restarted operator resumes from: the phase bound restarts at `now`.
    pub fn resumed(mut status: RejoinStatus, now: Timestamp) -> RejoinMemory {
        status.phase_since = Some(now);
        RejoinMemory {
            status,
            annotation_cleared: false,
        }
    }
}

/// Whether the rejoin `entry` records holds its site fenced: archiving, re-seeding, or past
/// its archive and not rejoined (whatever its phase says since: a re-seed that failed may
/// have loaded part of a dump, so only a rejoin's completion makes the site a replica).
pub(super) fn holds_record(entry: &SiteMemory) -> bool {
    entry.rejoin.as_ref().is_some_and(|rejoin| {
        let status = &rejoin.status;
        match status.phase {
            RejoinPhase::Archiving | RejoinPhase::Reseeding => true,
            RejoinPhase::Requested
            | RejoinPhase::Deferred
            | RejoinPhase::Failed
            | RejoinPhase::Refused => status.archived_at.is_some() && status.completed_at.is_none(),
            RejoinPhase::Completed => false,
        }
    })
}

/// Whether a rejoin holds `site` fenced ([`holds_record`]), or its sidecar reports an archive
/// or re-seed job running (a job memory does not account for: a status that lost the rejoin).
pub(super) fn holds(context: &Context<'_>, memory: &GroupMemory, site: &str) -> bool {
    let recorded = memory.site(site).is_some_and(holds_record);
    let job_running = status_of(context, site)
        .and_then(|status| status.job.as_ref())
        .is_some_and(|job| {
            job.state == JobState::Running
                && match job.kind {
                    JobKind::Archive | JobKind::Reseed => true,
                    JobKind::Backup | JobKind::Restore => false,
                }
        });
    recorded || job_running
}

/// Whether `phase` is a rejoin under way (the site fenced explicitly, jobs on its sidecar):
/// a deferrable disruption in flight, for the failover-hold gate.
fn under_way(phase: RejoinPhase) -> bool {
    match phase {
        RejoinPhase::Archiving | RejoinPhase::Reseeding => true,
        RejoinPhase::Requested
        | RejoinPhase::Deferred
        | RejoinPhase::Completed
        | RejoinPhase::Failed
        | RejoinPhase::Refused => false,
    }
}

fn phase_of(entry: &SiteMemory) -> Option<RejoinPhase> {
    entry.rejoin.as_ref().map(|rejoin| rejoin.status.phase)
}

/// The site whose rejoin is under way (archiving or re-seeding), if any: a restore in place
/// and an ordered update wait for it.
pub(super) fn in_flight_site(memory: &GroupMemory) -> Option<&str> {
    memory
        .sites
        .iter()
        .find(|entry| phase_of(entry).is_some_and(under_way))
        .map(|entry| entry.site.as_str())
}

/// Whether a rejoin is a deferrable disruption in flight (the hold gate stays closed).
pub(super) fn in_flight(memory: &GroupMemory) -> bool {
    in_flight_site(memory).is_some()
}

/// The site whose rejoin is requested and not over (requested, deferred or under way).
fn pending_site(memory: &GroupMemory) -> Option<&str> {
    memory
        .sites
        .iter()
        .find(|entry| phase_of(entry).is_some_and(|phase| !phase.is_final()))
        .map(|entry| entry.site.as_str())
}

/// The gated start of a rejoin: the decision that moves one under way (fenced for its
/// archive, or re-seeded from a kept archive) that was not under way before.
pub(super) fn gated_start(previous: &GroupMemory, decided: &GroupMemory) -> Option<GatedStart> {
    let started = decided.sites.iter().find(|entry| {
        phase_of(entry).is_some_and(under_way)
            && !previous
                .site(&entry.site)
                .and_then(phase_of)
                .is_some_and(under_way)
    })?;
    let kind = DisruptionKind::Rejoin;
    assert!(
        kind.consults_deployment_hold(),
        "the gate guards only disruptions a failover-hold defers"
    );
    Some(GatedStart {
        kind,
        from: decided.active_site.clone(),
        target: started.site.clone(),
        topology_generation: previous.topology_generation,
    })
}

/// Takes a new request (the annotation, or the automatic policy) and advances every rejoin
/// not over.
pub(super) fn rejoin_step(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    intake(context, memory, plan);
    automatic(context, memory, plan);
    let sites: Vec<String> = memory
        .sites
        .iter()
        .filter(|entry| phase_of(entry).is_some_and(|phase| !phase.is_final()))
        .map(|entry| entry.site.clone())
        .collect();
    for site in sites {
        let Some(phase) = memory.site(&site).and_then(phase_of) else {
            continue;
        };
        match phase {
            RejoinPhase::Requested | RejoinPhase::Deferred => admit(context, memory, plan, &site),
            RejoinPhase::Archiving => archiving(context, memory, plan, &site),
            RejoinPhase::Reseeding => reseeding(context, memory, plan, &site),
            RejoinPhase::Completed | RejoinPhase::Failed | RejoinPhase::Refused => {}
        }
    }
}

/// The annotation's request: a new record for the site it names, the handled one removed, a
/// request not yet admitted withdrawn when the annotation no longer names its site.
fn intake(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    let annotation = context.observation.annotations.rejoin.clone();
    let others: Vec<String> = memory
        .sites
        .iter()
        .filter(|entry| annotation.as_deref() != Some(entry.site.as_str()))
        .filter(|entry| entry.rejoin.is_some())
        .map(|entry| entry.site.clone())
        .collect();
    for site in others {
        let Some(rejoin) = rejoin_mut(memory, &site) else {
            continue;
        };
        rejoin.annotation_cleared = true;
        let withdrawn = !rejoin.status.automatic
            && matches!(
                rejoin.status.phase,
                RejoinPhase::Requested | RejoinPhase::Deferred
            );
        if withdrawn {
            refuse(
                context,
                memory,
                plan,
                &site,
                "request withdrawn (annotation removed)".to_owned(),
            );
        }
    }
    let Some(site) = annotation else {
        return;
    };
    let Some(entry) = memory.site(&site) else {
        let sites: Vec<&str> = context.site_names().collect();
        plan.event(
            EventReason::RejoinRefused,
            format!(
                "rejoin of {site} refused: {site} is not a site of this group (sites: {})",
                sites.join(", ")
            ),
        );
        plan.tail(Action::Annotate(AnnotationChange::ClearRejoin));
        return;
    };
    match entry.rejoin.as_ref() {
        Some(rejoin) if !rejoin.status.phase.is_final() => {}
        Some(rejoin) if !rejoin.annotation_cleared => {
            // Handled already: its removal failed, or the operator restarted since.
            let message = format!(
                "the annotation {}={site} is taken as the request already handled (that rejoin is {:?}: {}) and removed: request a rejoin again for a new one",
                names::ANNOTATION_REJOIN,
                rejoin.status.phase,
                rejoin.status.message.as_deref().unwrap_or("")
            );
            plan.event(EventReason::RejoinRefused, message);
            plan.tail(Action::Annotate(AnnotationChange::ClearRejoin));
        }
        Some(_) | None => {
            let message = format!(
                "rejoin of {site} requested ({}={site})",
                names::ANNOTATION_REJOIN
            );
            start_request(context, memory, plan, &site, false, message);
        }
    }
}

/// `spec.returningPrimary.onErrant: rejoin`: a rejoin of the first demoted site that is
/// readable and holds errant transactions, when nothing would refuse it and it has no rejoin
/// of its own that failed or was refused by the policy.
fn automatic(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    match context.spec.returning_primary.on_errant {
        OnErrant::Fence => return,
        OnErrant::Rejoin => {}
    }
    if group_blocker(memory).is_some() || pending_site(memory).is_some() {
        return;
    }
    let active = memory.active_site.clone();
    let candidates: Vec<(String, GtidSet)> = memory
        .sites
        .iter()
        .filter(|entry| entry.state == SiteState::Demoted && entry.site != active)
        .filter(|entry| match entry.rejoin.as_ref().map(|r| &r.status) {
            None => true,
            Some(status) => match status.phase {
                RejoinPhase::Completed => true,
                RejoinPhase::Refused => !status.automatic,
                RejoinPhase::Failed
                | RejoinPhase::Requested
                | RejoinPhase::Deferred
                | RejoinPhase::Archiving
                | RejoinPhase::Reseeding => false,
            },
        })
        .filter_map(|entry| {
            let errant = current_errant(context, memory, &entry.site)?;
            (!errant.is_empty()).then(|| (entry.site.clone(), errant))
        })
        .collect();
    let Some((site, errant)) = candidates.into_iter().next() else {
        return;
    };
    let message = format!(
        "{site} holds {} errant transactions against {active} ({errant}); spec.returningPrimary.onErrant: rejoin starts its rejoin: archive first, then a re-seed from {active}",
        errant.count()
    );
    start_request(context, memory, plan, &site, true, message);
}

/// A new rejoin record for `site` in `Requested`. What a previous rejoin of the site archived
/// and did not complete is carried: that archive holds the site until a rejoin completes,
/// and may be re-used.
fn start_request(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
    site: &str,
    automatic: bool,
    message: String,
) {
    let Some(entry) = memory.site_mut(site) else {
        return;
    };
    let carried = entry
        .rejoin
        .as_ref()
        .map(|rejoin| rejoin.status.clone())
        .filter(|status| status.archived_at.is_some() && status.completed_at.is_none());
    let mut status = RejoinStatus::requested(automatic, context.now, message.clone());
    if let Some(carried) = carried {
        status.archive = carried.archive;
        status.errant_gtid_set = carried.errant_gtid_set;
        status.archived_at = carried.archived_at;
        status.rejoin_id = carried.rejoin_id;
    } else {
        status.rejoin_id = entry.rejoin.as_ref().and_then(|r| r.status.rejoin_id);
    }
    entry.rejoin = Some(RejoinMemory {
        status,
        annotation_cleared: false,
    });
    plan.event(EventReason::RejoinRequested, message);
}

/// Why no rejoin may start in the group now, whatever the site: a restore in place, an
/// ordered update or a failover in flight or requested, or no valid authority.
fn group_blocker(memory: &GroupMemory) -> Option<String> {
    if let Some(restore) = memory
        .restore
        .as_ref()
        .filter(|_| super::restore::pending(memory))
    {
        return Some(format!(
            "a restore in place of {} is in flight (phase {:?})",
            restore.status.site, restore.status.phase
        ));
    }
    if let Some(update) = memory
        .ordered_update
        .as_ref()
        .filter(|update| update.in_flight())
    {
        return Some(format!(
            "an ordered update to {} is in flight (phase {:?})",
            update.target_image, update.phase
        ));
    }
    if memory.emergency_failover.is_some() || moving(memory) {
        return Some("a failover is in flight".to_owned());
    }
    if let Some(planned) = memory.planned_failover.as_ref() {
        let over = match planned.phase {
            PlannedFailoverPhase::Completed | PlannedFailoverPhase::Rejected => true,
            PlannedFailoverPhase::Admitting
            | PlannedFailoverPhase::Deferred
            | PlannedFailoverPhase::Draining
            | PlannedFailoverPhase::Promoting => false,
        };
        if !over {
            return Some(format!(
                "a planned failover to {} is in flight (phase {:?})",
                planned.target, planned.phase
            ));
        }
    }
    if let Some(failover) = memory
        .last_failover
        .as_ref()
        .filter(|failover| failover.completed_at.is_none())
    {
        return Some(format!(
            "the failover to {} is in flight (its promotion is not yet confirmed)",
            failover.to
        ));
    }
    if let super::memory::AuthorityValidity::Invalid(reason) = &memory.authority {
        return Some(format!(
            "the group has no valid authority ({}): no active site is confirmed writable to re-seed from",
            reason.as_str()
        ));
    }
    None
}

/// The errant transactions of the demoted `site` against the active site, as read this poll
/// (`None`: either is not readable).
fn current_errant(context: &Context<'_>, memory: &GroupMemory, site: &str) -> Option<GtidSet> {
    let view = context.view(site);
    if !view.is_up() {
        return None;
    }
    let gtid = view.gtid.as_ref()?;
    let active_gtid = context.view(&memory.active_site).gtid.as_ref()?;
    Some(errant_of(context, memory, site, gtid, active_gtid))
}

fn rejoin_mut<'a>(memory: &'a mut GroupMemory, site: &str) -> Option<&'a mut RejoinMemory> {
    memory.site_mut(site)?.rejoin.as_mut()
}

fn status_mut<'a>(memory: &'a mut GroupMemory, site: &str) -> Option<&'a mut RejoinStatus> {
    rejoin_mut(memory, site).map(|rejoin| &mut rejoin.status)
}

fn record(memory: &GroupMemory, site: &str) -> Option<RejoinStatus> {
    memory
        .site(site)?
        .rejoin
        .as_ref()
        .map(|rejoin| rejoin.status.clone())
}

fn enter(status: &mut RejoinStatus, phase: RejoinPhase, now: Timestamp, message: String) {
    status.phase = phase;
    status.phase_since = Some(now);
    status.message = Some(message);
}

fn phase_age(status: &RejoinStatus, now: Timestamp) -> Duration {
    status
        .phase_since
        .map(|since| now.saturating_duration_since(since))
        .unwrap_or_default()
}

fn parse(context: &Context<'_>, text: &str) -> Option<GtidSet> {
    GtidSet::parse(mysql_flavor(context.spec.flavor), text).ok()
}

/// The annotation is removed once the rejoin it names is over (only while it still names
/// this site: a newer request for another site is kept).
fn clear_annotation(context: &Context<'_>, plan: &mut Plan, site: &str) {
    if context.observation.annotations.rejoin.as_deref() == Some(site) {
        plan.tail(Action::Annotate(AnnotationChange::ClearRejoin));
    }
}

/// Ends the rejoin of `site` in `Refused` with `why` (nothing was done: the site is as it
/// was).
fn refuse(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
    site: &str,
    why: String,
) {
    let now = context.now;
    let Some(status) = status_mut(memory, site) else {
        return;
    };
    let message = format!("rejoin of {site} refused: {why}");
    status.admission = Admission::default();
    enter(status, RejoinPhase::Refused, now, message.clone());
    plan.event(EventReason::RejoinRefused, message);
    clear_annotation(context, plan, site);
}

/// Ends the rejoin of `site` in `Failed` with `why`: the site stays fenced, and an archive
/// written is kept.
fn fail(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan, site: &str, why: String) {
    let now = context.now;
    let Some(status) = status_mut(memory, site) else {
        return;
    };
    let kept = match (&status.archive, status.archived_at) {
        (Some(archive), Some(_)) => format!(
            "; archive {archive} is kept (archives/{archive}/ on {site}'s backups volume: errant GTID set {})",
            status.errant_gtid_set.as_deref().unwrap_or("")
        ),
        (Some(_), None) | (None, _) => String::new(),
    };
    let message = format!(
        "rejoin of {site} failed: {why}; {site} stays fenced (role=fenced, in no shared Service){kept}: request a rejoin again"
    );
    status.admission = Admission::default();
    enter(status, RejoinPhase::Failed, now, message.clone());
    plan.event(EventReason::RejoinFailed, message);
    clear_annotation(context, plan, site);
}

/// `Requested` or `Deferred`: refused, deferred, or admitted (into `Archiving`, or into
/// `Reseeding` when an archive a failed rejoin kept holds every errant transaction).
fn admit(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan, site: &str) {
    let now = context.now;
    let Some(status) = record(memory, site) else {
        return;
    };
    let active = memory.active_site.clone();
    if site == active {
        return refuse(
            context,
            memory,
            plan,
            site,
            format!("{site} is the active site"),
        );
    }
    let state = memory.site(site).map(|entry| entry.state);
    match state {
        Some(SiteState::Demoted) => {}
        Some(SiteState::Active | SiteState::Replica) | None => {
            return refuse(
                context,
                memory,
                plan,
                site,
                format!("{site} is not fenced (it is not a returning primary): there is nothing to rejoin"),
            );
        }
    }
    if let Some(why) = group_blocker(memory) {
        return refuse(context, memory, plan, site, why);
    }
    if let Some(other) = pending_site(memory).filter(|other| *other != site) {
        let why = format!("the rejoin of {other} is in flight");
        return refuse(context, memory, plan, site, why);
    }
    let Some(errant) = current_errant(context, memory, site) else {
        let why = format!(
            "{site} or the active site {active} is not readable now: {site}'s errant transactions are unknown"
        );
        return refuse(context, memory, plan, site, why);
    };
    // An archive a failed rejoin kept, holding every errant transaction the site holds now
    // (none, after a re-seed that loaded its dump), is re-used: nothing is archived twice.
    let kept = status
        .archived_at
        .and(status.errant_gtid_set.as_deref())
        .and_then(|text| parse(context, text))
        .filter(|archived| archived.contains(&errant));
    if errant.is_empty() && kept.is_none() {
        let why = format!(
            "{site} has no errant transactions against {active}: it rejoins as a replica without a rejoin"
        );
        return refuse(context, memory, plan, site, why);
    }
    let previous_id = status.rejoin_id;
    let rejoin_id = rejoin_id_at(now, previous_id);
    let archive = names::rejoin_archive(site, rejoin_id);
    if kept.is_none() {
        if let Some(problem) = backup_name_problem(&archive) {
            return refuse(context, memory, plan, site, problem);
        }
    }
    if let Some(hold) = context.observation.deploy_hold.clone() {
        let entering = status.phase != RejoinPhase::Deferred;
        let admission = super::gate::hold_deferral(&format!("rejoin of {site}"), &hold);
        let message = admission.message.clone().unwrap_or_default();
        if let Some(status) = status_mut(memory, site) {
            status.phase = RejoinPhase::Deferred;
            status.admission = admission;
            status.message = Some(message.clone());
            if entering {
                status.phase_since = Some(now);
                plan.event(EventReason::RejoinDeferred, message);
            }
        }
        return;
    }
    if status.phase == RejoinPhase::Deferred {
        // The hold is gone: back to Requested, validated again next poll.
        let message =
            format!("rejoin of {site} requested again: the failover-hold was released or lapsed");
        if let Some(status) = status_mut(memory, site) {
            status.admission = Admission::default();
            enter(status, RejoinPhase::Requested, now, message.clone());
        }
        plan.event(EventReason::RejoinRequested, message);
        return;
    }
    match kept {
        Some(_) => {
            let archive = status.archive.clone().unwrap_or_default();
            let message = format!(
                "rejoin of {site}: archive {archive} (errant GTID set {}) is kept from an earlier rejoin and holds every errant transaction {site} holds now; re-seeding {site} from {active}",
                status.errant_gtid_set.as_deref().unwrap_or("")
            );
            if let Some(status) = status_mut(memory, site) {
                status.admission = Admission::default();
                status.rejoin_id = Some(rejoin_id);
                status.active_site = Some(active);
                enter(status, RejoinPhase::Reseeding, now, message.clone());
            }
            plan.event(EventReason::RejoinArchived, message);
            reseeding(context, memory, plan, site);
        }
        None => {
            let message = format!(
                "rejoin of {site}: {site} fenced for archive {archive} of its {} errant transactions ({errant}), then a re-seed from {active}",
                errant.count()
            );
            if let Some(status) = status_mut(memory, site) {
                status.admission = Admission::default();
                status.rejoin_id = Some(rejoin_id);
                status.active_site = Some(active);
                status.archive = Some(archive);
                status.errant_gtid_set = Some(errant.to_string());
                status.archived_at = None;
                enter(status, RejoinPhase::Archiving, now, message.clone());
            }
            plan.cross_site(fence_action(context, memory, site));
            plan.event(EventReason::RejoinArchiving, message);
        }
    }
}

/// The rejoin id: the admission time in Unix seconds, above the previous rejoin's of the
/// site. Its jobs on the site's sidecar carry it; a restore's ids are topology generations,
/// far below any such time, so neither mistakes the other's job for its own, and a rejoin
/// requested again never gets the outcome of the one before it.
fn rejoin_id_at(now: Timestamp, previous: Option<u64>) -> u64 {
    let seconds = u64::try_from(now.unix_millis() / 1000).unwrap_or(0);
    previous.map_or(seconds, |previous| seconds.max(previous.saturating_add(1)))
}

/// The explicit fence a rejoin keeps on its site while it archives (the sidecar archives only
/// under one): at the current generation, connections kept (the site is read-only already).
fn fence_action(context: &Context<'_>, memory: &GroupMemory, site: &str) -> Action {
    let archive = record(memory, site)
        .and_then(|status| status.archive)
        .unwrap_or_default();
    Action::Fence {
        site: site.to_string(),
        request: FenceRequest {
            group: context.group().to_string(),
            topology_generation: memory.topology_generation,
            kill_connections: false,
            reason: format!("rejoin of {site}: archive {archive}"),
        },
    }
}

/// Why the rejoin recorded in `status` cannot go on: the active site moved since it was
/// admitted, or a move is in flight.
fn moved(memory: &GroupMemory, status: &RejoinStatus) -> Option<String> {
    let admitted = status.active_site.as_deref().unwrap_or("");
    if memory.emergency_failover.is_some() || moving(memory) {
        return Some(format!(
            "a failover moves the authority away from {admitted}"
        ));
    }
    (memory.active_site != admitted).then(|| {
        format!(
            "the active site moved from {admitted} to {} during the rejoin",
            memory.active_site
        )
    })
}

fn archiving(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan, site: &str) {
    let now = context.now;
    let Some(status) = record(memory, site) else {
        return;
    };
    if let Some(why) = moved(memory, &status) {
        return fail(context, memory, plan, site, why);
    }
    let (Some(archive), Some(id), Some(errant)) = (
        status.archive.clone(),
        status.rejoin_id,
        status.errant_gtid_set.clone(),
    ) else {
        return fail(
            context,
            memory,
            plan,
            site,
            "its record names no archive".to_owned(),
        );
    };
    // A re-seed under this rejoin's id is asked for only once its archive was seen complete:
    // the status that recorded that was lost (an operator restarted before writing it).
    let reseed_asked = status_of(context, site)
        .and_then(|reading| reading.job.as_ref())
        .is_some_and(|job| job.kind == JobKind::Reseed && job.restore_id == id);
    if reseed_asked {
        return archived(context, memory, plan, site);
    }
    let job = job_of(context, site, JobKind::Archive, &archive, id).cloned();
    match job.as_ref().map(|job| job.state) {
        Some(JobState::Succeeded) => return archived(context, memory, plan, site),
        Some(JobState::Failed) => {
            let why = job
                .and_then(|job| job.message)
                .unwrap_or_else(|| "the sidecar reported it failed".to_owned());
            return fail(
                context,
                memory,
                plan,
                site,
                format!("archive {archive} failed: {why}; nothing was re-seeded"),
            );
        }
        Some(JobState::Running) => plan.cross_site(fence_action(context, memory, site)),
        None => {
            plan.cross_site(fence_action(context, memory, site));
            let view = context.view(site);
            let fence_in_force = status_of(context, site).is_some_and(|s| s.fence.is_some());
            if fence_in_force && view.mysql_up && view.read_only == Some(true) {
                plan.cross_site(Action::Archive {
                    site: site.to_string(),
                    request: ArchiveRequest {
                        group: context.group().to_string(),
                        name: archive.clone(),
                        rejoin_id: id,
                        errant_gtid_set: errant,
                    },
                });
            }
        }
    }
    if phase_age(&status, now) > REJOIN_ARCHIVE_TIMEOUT {
        fail(
            context,
            memory,
            plan,
            site,
            format!(
                "archive {archive} was not reported complete within {REJOIN_ARCHIVE_TIMEOUT:?} (a sidecar refuses an archive without a backups volume, without the fence in force, or when the site does not hold every errant transaction: the operator's log has its answer)"
            ),
        );
    }
}

/// The archive is complete: `Reseeding` from the active site.
fn archived(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan, site: &str) {
    let now = context.now;
    let active = memory.active_site.clone();
    let Some(status) = status_mut(memory, site) else {
        return;
    };
    let archive = status.archive.clone().unwrap_or_default();
    let errant = status.errant_gtid_set.clone().unwrap_or_default();
    let message = format!(
        "archive {archive} of {site} complete: archives/{archive}/ on {site}'s backups volume holds its errant transactions ({errant}) and a full dump; re-seeding {site} from {active}"
    );
    status.archived_at = status.archived_at.or(Some(now));
    enter(status, RejoinPhase::Reseeding, now, message.clone());
    plan.event(EventReason::RejoinArchived, message);
    reseeding(context, memory, plan, site);
}

fn reseeding(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan, site: &str) {
    let now = context.now;
    let Some(status) = record(memory, site) else {
        return;
    };
    if let Some(why) = moved(memory, &status) {
        return fail(context, memory, plan, site, why);
    }
    let Some(id) = status.rejoin_id else {
        return fail(
            context,
            memory,
            plan,
            site,
            "its record has no rejoin id".to_owned(),
        );
    };
    let active = memory.active_site.clone();
    let request = reseed_request_from(context, &active, id);
    match advance_reseed(context, plan, site, &request) {
        ReseedProgress::Failed(why) => {
            return fail(
                context,
                memory,
                plan,
                site,
                format!("re-seeding {site} from {active} failed: {why}"),
            );
        }
        ReseedProgress::Running => {}
        ReseedProgress::Succeeded => {
            if let Some(status) = status_mut(memory, site) {
                status.reseeded_at = status.reseeded_at.or(Some(now));
            }
            if rejoined(context, memory, plan, site) {
                return;
            }
        }
    }
    let Some(status) = record(memory, site) else {
        return;
    };
    if phase_age(&status, now) > REJOIN_RESEED_TIMEOUT {
        fail(
            context,
            memory,
            plan,
            site,
            format!(
                "{site} was not seen re-seeded and replicating directly from {active} within {REJOIN_RESEED_TIMEOUT:?}"
            ),
        );
    }
}

/// The re-seed is done: once the site holds nothing the active site lacks and replicates
/// directly from it (repointed if it does not), under a valid authority, it is a replica
/// again. `true`: the rejoin ended (completed or failed).
fn rejoined(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan, site: &str) -> bool {
    let active = memory.active_site.clone();
    let view = context.view(site);
    let (Some(gtid), Some(active_gtid)) = (view.gtid.clone(), context.view(&active).gtid.clone())
    else {
        return false;
    };
    if !view.is_up() {
        return false;
    }
    let errant = errant_transactions(&gtid, &active_gtid);
    if !errant.is_empty() {
        fail(
            context,
            memory,
            plan,
            site,
            format!(
                "its sidecar reported the re-seed from {active} done, but {site} holds {} transactions {active} lacks ({errant})",
                errant.count()
            ),
        );
        return true;
    }
    if !replicates_from(context, site, &active) || !view.replicating() {
        // It holds nothing the active site lacks: pointing it there loses nothing.
        plan.cross_site(repoint_action(context, site, &active));
        return false;
    }
    if !memory.authority.is_valid() {
        return false;
    }
    plan.transition_site(context, memory, site, SiteState::Replica);
    let now = context.now;
    if let Some(entry) = memory.site_mut(site) {
        entry.errant = Some(errant);
    }
    let Some(status) = status_mut(memory, site) else {
        return true;
    };
    let archive = status.archive.clone().unwrap_or_default();
    let archived = status.errant_gtid_set.clone().unwrap_or_default();
    let count = parse(context, &archived).map_or(0, |set| set.count());
    let message = format!(
        "{site} rejoined as a replica of {active}: re-seeded from it and replicating directly from it, no errant transactions; its former {count} errant transactions ({archived}) are in archive {archive} (archives/{archive}/ on {site}'s backups volume)"
    );
    status.completed_at = Some(now);
    status.admission = Admission::default();
    enter(status, RejoinPhase::Completed, now, message.clone());
    plan.event(EventReason::RejoinCompleted, message);
    clear_annotation(context, plan, site);
    true
}
