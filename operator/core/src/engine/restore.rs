//! Named backups and restore-in-place of the active site
//! (docs/design/history.md#issue-12-part-2;
//! docs/design/operator.md#ordered-update-and-restore-in-place; docs/design/requirements.md
//! R000.9 and R003.17).
//!
//! # Backup
//!
//! The annotation `bloodraven.shipstream.io/backup=<name>` (`kubectl bloodraven backup`)
//! asks the active site's sidecar for a named backup ([`Action::Backup`], every poll until
//! its sidecar reports the backup on its volume or the job failed); `status.lastBackup`
//! follows it and the annotation is removed at the end.
//!
//! # Restore in place
//!
//! The annotation `bloodraven.shipstream.io/restore=<backup>` (`kubectl bloodraven restore
//! <group> --from <backup>`) restores the active site from a backup on its own volume, by its
//! logical dump; `<backup>,method=physical` (`--method physical`) by its `mariadb-backup`
//! copy instead, and `method=logical` says the default explicitly ([`RestoreSource`]; a value
//! of another form fails the request, naming what is wrong). The method only changes what the
//! sidecar does in `Restoring` and which of the backup's two GTID sets the site must hold
//! after it (`BackupInfo::gtid_set_for`: the copy is taken after the dump, so it has its own);
//! a backup without a copy fails a physical request in admission, saying so.
//!
//! 1. **Admitting** (or **Deferred**): the backup must be listed by the active site's sidecar;
//!    the authority must be valid with no failover in flight; a live failover-hold defers it
//!    (`deferReason: DeploymentHold`, `retryTime` = the earliest hold expiry), as it defers a
//!    planned failover (docs/design/requirements.md R003.17). The cooldown is not consulted:
//!    the active site does not change.
//! 2. **Fencing**: `Fence` (connections killed) on the active site, whose pod is stamped
//!    `role=fenced` at once, so it leaves both shared Services (docs/design/requirements.md
//!    R000.9). No authority is pushed while the restore holds the site (the fence lifts only at
//!    a greater generation). Once its sidecar reports the fence in force and mysqld read-only,
//!    its GTID set is everything it ever committed (`fencedGtidSet`). A fence not confirmed
//!    within [`RESTORE_FENCE_TIMEOUT`] aborts: the site is re-asserted at a new generation,
//!    data untouched. A retry on a site a failed load left fenced is no site in service: it
//!    is never re-asserted, and its retry waits for the fence and for mysqld, in admission
//!    and here, within [`RESTORE_RETRY_TIMEOUT`] ([`retries_held_site`]).
//! 3. **Restoring**: `Restore` on the fenced site until its sidecar reports the job. A failed
//!    load stops the restore and the site **stays fenced** (its data may be partly
//!    restored; a write accepted then would be on a state nobody chose): the message says so,
//!    and a new restore request is the way on. A physical restore stops mysqld for the swap
//!    (its sidecar keeps answering): the site's polls fail meanwhile and it may be detected
//!    `Failed`, but a restore holding the site ([`holds_fenced`]) is an authority move in
//!    flight (`failover::moving`), so no emergency failover starts from it, and the site
//!    recovers its detection once mysqld answers again.
//! 4. **Promoting**: once the site reads exactly the backup's GTID set, it is re-promoted:
//!    `topologyGeneration += 1` (the restore id), every deploy lease revoked
//!    (`TopologyChanged`), and what was lost recorded (`lostTransactions`, `lostGtidSet`: the
//!    fenced set minus the backup's, exact). The authority push follows (convergence) and
//!    lifts the fence. The re-promotion is noted in the `last-failover` annotation (kind
//!    `restore`) and the `restore` annotation is removed: the request is spent, and a status
//!    reverted to before it adopts its generation instead of issuing it again, and finds no
//!    request to run a second time over the writes taken since.
//! 5. **Reseeding**: once the authority is valid again, every other site whose GTID set is
//!    not exactly the backup's is re-seeded from the active site (`Reseed`): its binlog was
//!    reset, so a replica behind cannot catch up and a replica ahead holds transactions under
//!    GTIDs the restored site will reuse. A site holding exactly the backup's set is repointed.
//!    Until re-seeded a site is never repointed at the restored site.
//! 6. **Completed**, or **Failed** with the reason.
//!
//! An emergency failover started before the re-promotion takes precedence: the restore
//! fails, saying so. One started after it (`Promoting`, `Reseeding`) does not undo the
//! restore: the sites awaiting their re-seed are no candidate for it (they hold what the
//! restore discarded, under GTIDs the restored site reuses), re-seeds already done are
//! recorded, and once the authority is valid again the rest are re-seeded from the site
//! active then.
//!
//! # Restore history
//!
//! `status.restore` records one restore; a new request replaces it. What earlier restores
//! discarded still matters after that, so each new record carries it forward:
//!
//! - `earlierDiscardedGtidSet`: every GTID the restores it replaced discarded. A restore
//!   rewinds the site, and the history written since reuses those numbers for other
//!   transactions: restoring to a backup taken before such a restore, those numbers vouch for
//!   no shared history, so they are no agreement point when this restore's discards are
//!   measured (`lost_transactions_across_rewind`).
//! - `discardedSinceFailover`: what the restores it replaced discarded from the last
//!   failover's new active site after that failover's promotion. With the record's own
//!   discards it is the part of the baseline of that failover's loss that the old primary's
//!   data is compared against when it is readable again ([`loss_baseline`]); it is dropped
//!   once another failover is the last one.

use bloodraven_api::{
    names,
    sidecar::{
        backup_name_problem, BackupInfo, BackupRequest, FenceRequest, JobKind, JobState, JobStatus,
        ReseedRequest, RestoreRequest, SidecarStatus,
    },
    Admission, BackupPhase, BackupStatus, DiscardedSinceFailover, OrderedUpdatePhase,
    PlannedFailoverPhase, RestoreMethod, RestorePhase, RestoreSource, RestoreStatus,
};
use bloodraven_mysql::{lost_transactions, lost_transactions_across_rewind, Flavor, GtidSet};

use super::action::{Action, AnnotationChange, EventReason};
use super::failover::{repoint_action, source_host_of};
use super::gate::GatedStart;
use super::memory::{GroupMemory, SiteState};
use super::note::{FailoverNote, PromotionKind, RestoreNote};
use super::observation::SidecarReading;
use super::plan::{Context, Plan};
use super::reading::mysql_flavor;
use crate::deploy::{DisruptionKind, RevokeReason};
use crate::time::{Duration, Timestamp};

/// How long a restore may wait in `Admitting` for a valid authority and no failover in
/// flight before it fails.
pub const RESTORE_ADMISSION_TIMEOUT: Duration = Duration::from_secs(120);
/// How long `Fencing` may wait for the sidecar to confirm mysqld read-only before the site is
/// re-asserted and the restore fails.
pub const RESTORE_FENCE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the sidecar's load may run before the restore fails (the site stays fenced).
pub const RESTORE_LOAD_TIMEOUT: Duration = Duration::from_secs(1800);
/// How long a retry on a site a failed load left fenced may wait in `Admitting` and in
/// `Fencing` (for its sidecar, for mysqld read-only under the fence) before it fails: as long
/// as a load may run, since the site is out of service either way; a fence not confirmed
/// then re-asserts nothing.
pub const RESTORE_RETRY_TIMEOUT: Duration = RESTORE_LOAD_TIMEOUT;
/// How long `Promoting` and `Reseeding` may each take before the restore fails.
pub const RESTORE_SETTLE_TIMEOUT: Duration = Duration::from_secs(1800);
/// How long a backup may run before it is reported failed.
pub const BACKUP_TIMEOUT: Duration = Duration::from_secs(1800);

/// `status.restore` plus what `decide` needs besides it.
#[derive(Clone, Debug, PartialEq)]
pub struct RestoreMemory {
    /// The persisted status.
    pub status: RestoreStatus,
    /// Whether, after a final phase, a poll saw the annotation gone (until then the same
    /// value is the request already handled, not a new one).
    pub annotation_cleared: bool,
}

impl RestoreMemory {
    /// The memory a restarted operator resumes from: the phase bound restarts at `now`.
    pub fn resumed(mut status: RestoreStatus, now: Timestamp) -> RestoreMemory {
        status.phase_since = Some(now);
        RestoreMemory {
            status,
            annotation_cleared: false,
        }
    }

    fn phase(&self) -> RestorePhase {
        self.status.phase
    }
}

/// Whether a restore holds the active site out of service: fenced and not re-promoted
/// (`Fencing`, `Restoring`, or `Failed` after the load started). The active site's pod is
/// `role=fenced`, its read-only mysqld is no failed poll, and no authority is pushed.
pub(super) fn holds_fenced(memory: &GroupMemory) -> Option<&str> {
    restore_holds_fenced(
        memory.restore.as_ref()?,
        &memory.active_site,
        memory.topology_generation,
    )
}

/// [`holds_fenced`] from its parts, for reading memory back from status before the
/// [`GroupMemory`] exists (`persist::from_status`).
pub(super) fn restore_holds_fenced<'a>(
    restore: &'a RestoreMemory,
    active_site: &str,
    topology_generation: u64,
) -> Option<&'a str> {
    let status = &restore.status;
    let reasserted = status
        .topology_generation
        .is_some_and(|generation| topology_generation >= generation);
    let holding = match status.phase {
        RestorePhase::Fencing | RestorePhase::Restoring => true,
        // After the load started and before a re-promotion or re-assertion (a failed load, or
        // a new request to restore a site a failed load left fenced).
        RestorePhase::Failed | RestorePhase::Admitting | RestorePhase::Deferred => {
            status.fenced_at.is_some() && status.promoted_at.is_none() && !reasserted
        }
        RestorePhase::Promoting | RestorePhase::Reseeding | RestorePhase::Completed => false,
    };
    (holding && status.site == active_site).then_some(status.site.as_str())
}

/// What the active site held as far as the last failover's loss is concerned: its GTID set,
/// plus what restores in place discarded from it after that failover's promotion: the one
/// `status.restore` records, and the ones it replaced (`discardedSinceFailover`; a second
/// restore requested before the old primary was readable again, simulator seed 3822
/// `--all-faults --restore --image-update`: the first restore's discards counted as the
/// failover's, 81 reported lost and exact, 5 lost). Those are the restores' loss, recorded
/// with them, not the failover's.
pub(super) fn loss_baseline(
    context: &Context<'_>,
    memory: &GroupMemory,
    active: &GtidSet,
) -> GtidSet {
    match discarded_since_last_failover(context, memory) {
        Some(discarded) => active.union(&discarded),
        None => active.clone(),
    }
}

/// What restores in place discarded from the last failover's new active site after that
/// failover's promotion: the one `status.restore` records and the ones it replaced
/// (`discardedSinceFailover`).
fn discarded_since_last_failover(context: &Context<'_>, memory: &GroupMemory) -> Option<GtidSet> {
    let status = &memory.restore.as_ref()?.status;
    let own = status
        .lost_gtid_set
        .as_deref()
        .filter(|_| discarded_after_failover(memory, status))
        .and_then(|text| parse(context, text));
    let earlier = status
        .discarded_since_failover
        .as_ref()
        .filter(|earlier| counts_for_last_failover(memory, earlier))
        .and_then(|earlier| parse(context, &earlier.gtid_set));
    [own, earlier]
        .into_iter()
        .flatten()
        .reduce(|all, discarded| all.union(&discarded))
}

/// What the demoted site `site` (read at `gtid`) holds of what the restore `status.restore`
/// records discarded: errant, whatever the restored site wrote under those GTIDs since. A
/// site neither re-seeded by the restore nor awaiting its re-seed was demoted when the
/// restore re-promoted its site (a replica then holding exactly the backup holds none of it),
/// and a demoted site replicates from nobody: its copy is from before the restore (simulator
/// seed 1663 with every fault mode: iad's 74 errant transactions shrank to none as pdx reused
/// their numbers, iad rejoined holding the discarded writes, and the next failover promoted
/// it). Conservative for a site that rejoined, became active and was demoted again under the
/// same record: it stays fenced, a human's call.
pub(super) fn pre_restore_copy(
    context: &Context<'_>,
    memory: &GroupMemory,
    site: &str,
    gtid: &GtidSet,
) -> Option<GtidSet> {
    let status = &memory.restore.as_ref()?.status;
    if status.promoted_at.is_none()
        || status.site == site
        || status.reseeded.iter().any(|s| s == site)
        || status.pending_reseed.iter().any(|s| s == site)
    {
        return None;
    }
    let discarded = parse(context, status.lost_gtid_set.as_deref()?)?;
    Some(gtid.intersect(&discarded)).filter(|copy| !copy.is_empty())
}

/// Whether the restore `status` records discarded from the last failover's new active site
/// after that failover's promotion.
fn discarded_after_failover(memory: &GroupMemory, status: &RestoreStatus) -> bool {
    memory.last_failover.as_ref().is_some_and(|failover| {
        failover.to == status.site
            && status
                .promoted_at
                .zip(failover.promoted_at)
                .is_some_and(|(restored, promoted)| restored >= promoted)
    })
}

/// Whether carried discards are of the last failover (its promotion and new active site).
fn counts_for_last_failover(memory: &GroupMemory, earlier: &DiscardedSinceFailover) -> bool {
    memory.last_failover.as_ref().is_some_and(|failover| {
        failover.promoted_at == Some(earlier.failover_promoted_at) && failover.to == earlier.site
    })
}

/// The restore history a new record carries from the one it replaces (`replaced`): every
/// GTID earlier restores discarded (`earlierDiscardedGtidSet`), and what they discarded from
/// the last failover's new active site after its promotion (`discardedSinceFailover`).
fn carried_history(
    context: &Context<'_>,
    memory: &GroupMemory,
    replaced: Option<&RestoreStatus>,
) -> (Option<String>, Option<DiscardedSinceFailover>) {
    let Some(replaced) = replaced else {
        return (None, None);
    };
    let merged = |sets: Vec<Option<&str>>| -> Option<GtidSet> {
        sets.into_iter()
            .flatten()
            .filter_map(|text| parse(context, text))
            .reduce(|all, more| all.union(&more))
    };
    let own = replaced.lost_gtid_set.as_deref();
    let earlier_discarded = merged(vec![replaced.earlier_discarded_gtid_set.as_deref(), own])
        .filter(|set| !set.is_empty())
        .map(|set| set.to_string());
    let since_failover = memory.last_failover.as_ref().and_then(|failover| {
        let promoted_at = failover.promoted_at?;
        let carried = replaced
            .discarded_since_failover
            .as_ref()
            .filter(|earlier| counts_for_last_failover(memory, earlier))
            .map(|earlier| earlier.gtid_set.as_str());
        let own = own.filter(|_| discarded_after_failover(memory, replaced));
        let set = merged(vec![carried, own]).filter(|set| !set.is_empty())?;
        Some(DiscardedSinceFailover {
            failover_promoted_at: promoted_at,
            site: failover.to.clone(),
            gtid_set: set.to_string(),
        })
    });
    (earlier_discarded, since_failover)
}

/// Whether `site` holds transactions the restored active site does not and awaits its
/// re-seed: it is never repointed at the active site meanwhile.
pub(super) fn withholds(memory: &GroupMemory, site: &str) -> bool {
    memory
        .restore
        .as_ref()
        .is_some_and(|restore| restore.status.pending_reseed.iter().any(|s| s == site))
}

/// Whether a restore is a deferrable disruption in flight (the hold gate stays closed).
pub(super) fn in_flight(memory: &GroupMemory) -> bool {
    memory.restore.as_ref().is_some_and(|restore| {
        matches!(
            restore.phase(),
            RestorePhase::Fencing
                | RestorePhase::Restoring
                | RestorePhase::Promoting
                | RestorePhase::Reseeding
        )
    })
}

/// A restore was requested and is not over: admitting, deferred or in flight. The ordered
/// update starts no step meanwhile (two planned disruptions never overlap).
pub(super) fn pending(memory: &GroupMemory) -> bool {
    in_flight(memory)
        || memory.restore.as_ref().is_some_and(|restore| {
            matches!(
                restore.phase(),
                RestorePhase::Admitting | RestorePhase::Deferred
            )
        })
}

/// The gated start of a restore: the decision that moves it into `Fencing`.
pub(super) fn gated_start(previous: &GroupMemory, decided: &GroupMemory) -> Option<GatedStart> {
    let restore = decided.restore.as_ref()?;
    if restore.phase() != RestorePhase::Fencing || in_flight(previous) {
        return None;
    }
    Some(GatedStart {
        kind: DisruptionKind::RestoreInPlace,
        from: restore.status.site.clone(),
        target: restore.status.site.clone(),
        topology_generation: previous.topology_generation,
    })
}

pub(super) fn status_of<'a>(context: &'a Context<'_>, site: &str) -> Option<&'a SidecarStatus> {
    context
        .observation
        .sites
        .iter()
        .find(|observed| observed.site == site)
        .and_then(|observed| match &observed.sidecar {
            SidecarReading::Reachable(status) => Some(status.as_ref()),
            SidecarReading::Unreachable { .. } => None,
        })
}

pub(super) fn job_of<'a>(
    context: &'a Context<'_>,
    site: &str,
    kind: JobKind,
    name: &str,
    id: u64,
) -> Option<&'a JobStatus> {
    status_of(context, site)?
        .job
        .as_ref()
        .filter(|job| job.is(kind, name, id))
}

fn backup_on<'a>(context: &'a Context<'_>, site: &str, name: &str) -> Option<&'a BackupInfo> {
    status_of(context, site)?
        .backups
        .iter()
        .find(|backup| backup.name == name)
}

fn parse(context: &Context<'_>, text: &str) -> Option<GtidSet> {
    GtidSet::parse(mysql_flavor(context.spec.flavor), text).ok()
}

/// A named backup: started on the annotation, followed until the sidecar reports it.
pub(super) fn backup_step(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    let now = context.now;
    let Some(name) = context.observation.annotations.backup.clone() else {
        return;
    };
    let active = memory.active_site.clone();
    let finished = |status: &BackupStatus| {
        status.name == name && matches!(status.phase, BackupPhase::Completed | BackupPhase::Failed)
    };
    if memory.last_backup.as_ref().is_some_and(finished) {
        // Handled; its removal may have failed.
        plan.tail(Action::Annotate(AnnotationChange::ClearBackup));
        return;
    }
    let fresh = memory
        .last_backup
        .as_ref()
        .is_none_or(|status| status.name != name);
    if fresh {
        memory.last_backup = Some(BackupStatus {
            name: name.clone(),
            site: active.clone(),
            phase: BackupPhase::Running,
            requested_at: Some(now),
            completed_at: None,
            gtid_set: None,
            message: None,
        });
    }
    let Some(status) = memory.last_backup.as_mut() else {
        return;
    };
    let site = status.site.clone();
    let outcome = if let Some(problem) = backup_name_problem(&name) {
        Some(Err(problem))
    } else if let Some(info) = backup_on(context, &site, &name) {
        Some(Ok(info.clone()))
    } else if let Some(job) = job_of(context, &site, JobKind::Backup, &name, 0)
        .filter(|job| job.state == JobState::Failed)
    {
        Some(Err(job.message.clone().unwrap_or_else(|| {
            "the sidecar reported the backup failed".to_owned()
        })))
    } else if status
        .requested_at
        .is_some_and(|at| now.saturating_duration_since(at) > BACKUP_TIMEOUT)
    {
        Some(Err(format!(
            "not reported on {site} within {BACKUP_TIMEOUT:?}"
        )))
    } else {
        None
    };
    match outcome {
        Some(Ok(info)) => {
            status.phase = BackupPhase::Completed;
            status.completed_at = Some(now);
            status.gtid_set = Some(info.gtid_set.clone());
            let message = format!(
                "backup {name} of {site} taken at GTID set {:?}: schemas {:?}, {} bytes of logical dump{}",
                info.gtid_set,
                info.databases,
                info.logical_bytes,
                if info.physical { " and a mariadb-backup copy" } else { "" }
            );
            status.message = Some(message.clone());
            plan.event(EventReason::BackupCompleted, message);
            plan.tail(Action::Annotate(AnnotationChange::ClearBackup));
        }
        Some(Err(why)) => {
            status.phase = BackupPhase::Failed;
            let message = format!("backup {name} of {site} failed: {why}");
            status.message = Some(message.clone());
            plan.event(EventReason::BackupFailed, message);
            plan.tail(Action::Annotate(AnnotationChange::ClearBackup));
        }
        None => {
            if fresh {
                plan.event(
                    EventReason::BackupStarted,
                    format!("backup {name} of {site} requested"),
                );
            }
            plan.cross_site(Action::Backup {
                site: site.clone(),
                request: BackupRequest {
                    group: context.group().to_string(),
                    name: name.clone(),
                },
            });
        }
    }
}

/// A restore's re-promotion read back from the `last-failover` annotation, newer than
/// memory: the status lost the restore's record (reverted to a copy from before it), so it
/// is rebuilt from the note (simulator seed 3085 with every fault mode: the reader still held
/// what the restore discarded, and without the record that read as transactions the restored
/// site lacks; no authority was issued again). The record resumes in `Promoting`: what the
/// restore discarded is off the history again, and every replica not known re-seeded for
/// this restore (its sidecar reports no finished re-seed under the restore's id) awaits its
/// re-seed, withheld meanwhile; a re-seed of one that needed none costs a dump, nothing else.
pub(super) fn rebuild_from_note(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
    note: &FailoverNote,
) {
    let Some(restored) = note.restore.as_ref() else {
        return;
    };
    let generation = note.topology_generation;
    if memory
        .restore
        .as_ref()
        .is_some_and(|restore| restore.status.topology_generation == Some(generation))
    {
        return;
    }
    let site = note.to.clone();
    // Replicas whose sidecar shows this restore's re-seed done are recorded as re-seeded
    // (their copies of the reused GTIDs are the restored site's, `pre_restore_copy`).
    let (reseeded, pending): (Vec<String>, Vec<String>) = memory
        .sites
        .iter()
        .filter(|entry| entry.site != site && entry.state == SiteState::Replica)
        .map(|entry| entry.site.clone())
        .partition(|replica| reseeded_for(context, replica, generation));
    let discarded = restored
        .discarded
        .as_deref()
        .and_then(|text| parse(context, text));
    let count = discarded.as_ref().map_or(0, GtidSet::count);
    let message = format!(
        "restore of {site} from {} ({}) re-promoted it at topology generation {generation}; its record rebuilt from annotation {} after the status lost it: {count} transactions discarded{}; re-seeded already: {reseeded:?}; awaiting re-seed: {pending:?}",
        restored.source.backup,
        method_words(restored.source.method),
        names::ANNOTATION_LAST_FAILOVER,
        discarded
            .as_ref()
            .filter(|set| !set.is_empty())
            .map(|set| format!(" ({set})"))
            .unwrap_or_default(),
    );
    let status = RestoreStatus {
        restored_at: Some(note.promoted_at),
        promoted_at: Some(note.promoted_at),
        topology_generation: Some(generation),
        lost_transactions: count,
        lost_gtid_set: discarded.as_ref().map(ToString::to_string),
        exact: discarded.is_some(),
        pending_reseed: pending,
        reseeded,
        ..new_record(
            context,
            memory,
            RestorePhase::Promoting,
            site,
            restored.source.clone(),
            &message,
        )
    };
    memory.restore = Some(RestoreMemory {
        status,
        annotation_cleared: false,
    });
    plan.event(EventReason::RestorePromoted, message);
}

/// Whether `site`'s sidecar reports a finished re-seed under restore id `generation` (from
/// any source).
fn reseeded_for(context: &Context<'_>, site: &str, generation: u64) -> bool {
    status_of(context, site)
        .and_then(|status| status.job.as_ref())
        .is_some_and(|job| {
            job.kind == JobKind::Reseed
                && job.restore_id == generation
                && job.state == JobState::Succeeded
        })
}

/// What restores discarded, by the record in memory: its own discards and every earlier
/// restore's it carries. Off the history by an earlier decision, as a failover's declared
/// loss is: a site still holding some of it awaits its re-seed, and it is no transaction the
/// active site lacks.
pub(super) fn discarded_by_restores(memory: &GroupMemory, flavor: Flavor) -> Option<GtidSet> {
    let status = &memory.restore.as_ref()?.status;
    [
        status.lost_gtid_set.as_deref(),
        status.earlier_discarded_gtid_set.as_deref(),
    ]
    .into_iter()
    .flatten()
    .filter_map(|text| GtidSet::parse(flavor, text).ok())
    .reduce(|all, more| all.union(&more))
}

/// The active site's sidecar holds a fence at memory's generation that nothing in memory
/// accounts for: no restore holds or fences the site, no planned failover drains it, no
/// emergency failover is under way. The decision that fenced it was lost with the status
/// (simulator seed 4593 with every fault mode: a restore fenced iad, the operator crashed
/// before the status recorded it, and the reverted memory's restore request then waited for
/// a valid authority that the fence, lifted only at a greater generation, never allowed; no
/// site was writable again). Nothing was loaded under such a fence unless the sidecar reports
/// a restore job under an id memory never issued: then the site's data may be partly
/// restored and it stays fenced (a new restore request is the way on, as after a failed
/// load). Otherwise the site is re-asserted at a new generation, data untouched, as a fence
/// that times out is.
pub(super) fn release_forgotten_fence(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
) {
    let site = memory.active_site.clone();
    let Some(status) = status_of(context, &site) else {
        return;
    };
    let Some(fence) = status.fence.as_ref() else {
        return;
    };
    let generation = memory.topology_generation;
    let restore_fencing = memory.restore.as_ref().is_some_and(|restore| {
        matches!(
            restore.phase(),
            RestorePhase::Fencing | RestorePhase::Restoring
        )
    });
    let planned_fencing = memory.planned_failover.as_ref().is_some_and(|planned| {
        matches!(
            planned.phase,
            PlannedFailoverPhase::Draining | PlannedFailoverPhase::Promoting
        )
    });
    if generation == 0
        || fence.topology_generation < generation
        || memory.emergency_failover.is_some()
        || super::failover::moving(memory)
        || restore_fencing
        || planned_fencing
    {
        return;
    }
    let unexplained_load = status
        .job
        .as_ref()
        .filter(|job| job.kind == JobKind::Restore && job.restore_id > generation);
    if let Some(job) = unexplained_load {
        // Recorded as the failed load it may be: the site stays fenced (`holds_fenced`), and
        // a restore requested again (the annotation, still there or set anew) is admitted on
        // it without a valid authority, as a retry after a failed load is.
        let message = format!(
            "{site} is fenced ({}) and its sidecar reports restore job {} {:?} under id {}, which no restore in memory accounts for (the status lost it): its data may be partly restored, so {site} stays fenced: request a restore again",
            fence.reason, job.name, job.state, job.restore_id
        );
        let source = RestoreSource {
            backup: job.name.clone(),
            method: RestoreMethod::default(),
        };
        let status = RestoreStatus {
            fenced_at: Some(context.now),
            ..new_record(
                context,
                memory,
                RestorePhase::Failed,
                site,
                source,
                &message,
            )
        };
        memory.restore = Some(RestoreMemory {
            status,
            annotation_cleared: true,
        });
        plan.event(EventReason::RestoreFailed, message);
        return;
    }
    memory.advance_generation();
    memory.authority_issued_at = Some(context.now);
    plan.cross_site(Action::RevokeDeployLeases {
        reason: RevokeReason::TopologyChanged,
        topology_generation: memory.topology_generation,
    });
    plan.event(
        EventReason::PrimaryReasserted,
        format!(
            "{site}'s sidecar holds a fence at generation {} ({}) that no operation in memory accounts for (the status lost the decision that fenced it); nothing was loaded: {site} re-asserted at generation {}",
            fence.topology_generation, fence.reason, memory.topology_generation
        ),
    );
}

/// A new `status.restore` record replacing memory's (`phase` from `now`, nothing done yet):
/// it carries the restore history of the record it replaces ([`carried_history`]).
fn new_record(
    context: &Context<'_>,
    memory: &GroupMemory,
    phase: RestorePhase,
    site: String,
    source: RestoreSource,
    message: &str,
) -> RestoreStatus {
    let (earlier_discarded_gtid_set, discarded_since_failover) = carried_history(
        context,
        memory,
        memory.restore.as_ref().map(|restore| &restore.status),
    );
    RestoreStatus {
        phase,
        backup: source.backup,
        method: source.method,
        site,
        admission: Admission::default(),
        message: Some(message.to_owned()),
        requested_at: None,
        phase_since: Some(context.now),
        fenced_at: None,
        restored_at: None,
        promoted_at: None,
        completed_at: None,
        topology_generation: None,
        fenced_gtid_set: None,
        backup_gtid_set: None,
        lost_transactions: 0,
        lost_gtid_set: None,
        exact: false,
        pending_reseed: Vec::new(),
        reseeded: Vec::new(),
        earlier_discarded_gtid_set,
        discarded_since_failover,
    }
}

/// Takes a new restore request from the annotation and advances the one in flight.
pub(super) fn restore_step(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    intake(context, memory, plan);
    let Some(phase) = memory.restore.as_ref().map(RestoreMemory::phase) else {
        return;
    };
    if memory.emergency_failover.is_some() {
        if matches!(phase, RestorePhase::Promoting | RestorePhase::Reseeding) {
            // Re-promoted already: the restore's data is in place and an emergency failover
            // does not undo it. What the sites awaiting their re-seed hold is still what the
            // restore discarded, so the restore goes on once the authority is valid again,
            // re-seeding them from whichever site is active then; meanwhile only re-seeds
            // already done are recorded (simulator seed 8103 with every fault mode: failed
            // here, the restore left iad withheld for good although its re-seed had just
            // finished).
            record_reseeds(context, memory);
            return;
        }
        if in_flight(memory) || matches!(phase, RestorePhase::Admitting | RestorePhase::Deferred) {
            fail(
                memory,
                plan,
                context.now,
                "an emergency failover took over the group".to_owned(),
            );
        }
        return;
    }
    match phase {
        RestorePhase::Admitting | RestorePhase::Deferred => admit(context, memory, plan),
        RestorePhase::Fencing => fencing(context, memory, plan),
        RestorePhase::Restoring => restoring(context, memory, plan),
        RestorePhase::Promoting => promoting(context, memory, plan),
        RestorePhase::Reseeding => reseeding(context, memory, plan),
        RestorePhase::Completed => {}
        RestorePhase::Failed => {
            if let Some(site) = holds_fenced(memory).map(str::to_owned) {
                // Still fenced after a failed load: keep it so (a restarted sidecar forgot
                // the fence; without it an authority push would make it writable).
                plan.cross_site(fence_action(context, memory, &site, false));
            }
        }
    }
}

/// The annotation's request: the backup and the method, or (the raw value, why it is
/// unusable). The raw value stands in for the backup's name then, so the request fails in
/// admission naming the problem, and the same bad value is not taken up twice.
fn requested(value: &str) -> (RestoreSource, Option<String>) {
    match RestoreSource::parse(value) {
        Ok(source) => (source, None),
        Err(problem) => (
            RestoreSource {
                backup: value.to_string(),
                method: RestoreMethod::Logical,
            },
            Some(problem),
        ),
    }
}

/// Whether the annotation's `value` is the request `status` records.
fn same_request(value: &str, status: &RestoreStatus) -> bool {
    let (source, _) = requested(value);
    source.backup == status.backup && source.method == status.method
}

fn intake(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    let annotation = context.observation.annotations.restore.clone();
    let now = context.now;
    let new_request = match (memory.restore.as_mut(), annotation) {
        (None, None) => None,
        (None, Some(name)) => Some(name),
        (Some(restore), annotation) => match restore.phase() {
            RestorePhase::Completed | RestorePhase::Failed => match annotation {
                None => {
                    restore.annotation_cleared = true;
                    None
                }
                Some(name)
                    if same_request(&name, &restore.status) && !restore.annotation_cleared =>
                {
                    plan.tail(Action::Annotate(AnnotationChange::ClearRestore));
                    None
                }
                Some(name) => Some(name),
            },
            RestorePhase::Admitting | RestorePhase::Deferred => match annotation {
                None => {
                    let backup = restore.status.backup.clone();
                    restore.annotation_cleared = true;
                    fail(
                        memory,
                        plan,
                        now,
                        format!("request to restore {backup} withdrawn (annotation removed)"),
                    );
                    None
                }
                Some(name) if !same_request(&name, &restore.status) => Some(name),
                Some(_) => None,
            },
            RestorePhase::Fencing
            | RestorePhase::Restoring
            | RestorePhase::Promoting
            | RestorePhase::Reseeding => None,
        },
    };
    let Some(value) = new_request else {
        return;
    };
    let (RestoreSource { backup, method }, problem) = requested(&value);
    // A failed restore that left the site fenced is retried on the same site, and keeps what
    // the site held when it was first fenced (the basis of what is lost).
    let carried = memory
        .restore
        .as_ref()
        .filter(|_| holds_fenced(memory).is_some())
        .map(|r| r.status.clone());
    let site = carried
        .as_ref()
        .map_or_else(|| memory.active_site.clone(), |c| c.site.clone());
    let message = format!(
        "restore of {site} from backup {backup} ({}) requested",
        method_words(method)
    );
    let status = RestoreStatus {
        requested_at: Some(now),
        fenced_at: carried.as_ref().and_then(|c| c.fenced_at),
        topology_generation: carried.as_ref().and_then(|c| c.topology_generation),
        fenced_gtid_set: carried.as_ref().and_then(|c| c.fenced_gtid_set.clone()),
        ..new_record(
            context,
            memory,
            RestorePhase::Admitting,
            site,
            RestoreSource { backup, method },
            &message,
        )
    };
    memory.restore = Some(RestoreMemory {
        status,
        annotation_cleared: false,
    });
    plan.event(EventReason::RestoreAdmitting, message);
    if let Some(problem) = problem {
        fail(memory, plan, now, problem);
    }
}

/// How a method loads the backup, for messages.
fn method_words(method: RestoreMethod) -> &'static str {
    match method {
        RestoreMethod::Logical => "its logical dump",
        RestoreMethod::Physical => "its mariadb-backup copy",
    }
}

fn status_mut(memory: &mut GroupMemory) -> Option<&mut RestoreStatus> {
    memory.restore.as_mut().map(|restore| &mut restore.status)
}

fn enter(status: &mut RestoreStatus, phase: RestorePhase, now: Timestamp, message: String) {
    status.phase = phase;
    status.phase_since = Some(now);
    status.message = Some(message);
}

fn phase_age(status: &RestoreStatus, now: Timestamp) -> Duration {
    status
        .phase_since
        .map(|since| now.saturating_duration_since(since))
        .unwrap_or_default()
}

/// Ends the restore in `Failed` with `why` (an Event, the annotation removed).
fn fail(memory: &mut GroupMemory, plan: &mut Plan, now: Timestamp, why: String) {
    let stays_fenced = {
        let Some(status) = status_mut(memory) else {
            return;
        };
        status.phase = RestorePhase::Failed;
        status.phase_since = Some(now);
        status.admission = Admission::default();
        status.fenced_at.is_some() && status.promoted_at.is_none()
    };
    let fenced = stays_fenced && holds_fenced(memory).is_some();
    let Some(status) = status_mut(memory) else {
        return;
    };
    let message = format!(
        "restore of {} from {} failed: {why}{}",
        status.site,
        status.backup,
        if fenced {
            format!(
                "; {} stays fenced (its data may be partly restored): request a restore again",
                status.site
            )
        } else {
            String::new()
        }
    );
    status.message = Some(message.clone());
    plan.event(EventReason::RestoreFailed, message);
    plan.tail(Action::Annotate(AnnotationChange::ClearRestore));
}

fn fence_action(context: &Context<'_>, memory: &GroupMemory, site: &str, kill: bool) -> Action {
    let backup = memory
        .restore
        .as_ref()
        .map(|restore| restore.status.backup.clone())
        .unwrap_or_default();
    Action::Fence {
        site: site.to_string(),
        request: FenceRequest {
            group: context.group().to_string(),
            topology_generation: memory.topology_generation,
            kill_connections: kill,
            reason: format!("restore in place from backup {backup}"),
        },
    }
}

fn admit(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    let now = context.now;
    let Some(status) = memory.restore.as_ref().map(|r| r.status.clone()) else {
        return;
    };
    let (site, backup) = (status.site.clone(), status.backup.clone());
    if let Some(problem) = backup_name_problem(&backup) {
        return fail(memory, plan, now, problem);
    }
    if site != memory.active_site {
        return fail(
            memory,
            plan,
            now,
            format!(
                "{site} is no longer the active site ({})",
                memory.active_site
            ),
        );
    }
    if let Some(hold) = context.observation.deploy_hold.clone() {
        let entering = status.phase != RestorePhase::Deferred;
        let admission = super::gate::hold_deferral(&format!("restore of {site}"), &hold);
        let message = admission.message.clone().unwrap_or_default();
        if let Some(status) = status_mut(memory) {
            status.phase = RestorePhase::Deferred;
            status.admission = admission;
            status.message = Some(message.clone());
            if entering {
                status.phase_since = Some(now);
                plan.event(EventReason::RestoreDeferred, message);
            }
        }
        return;
    }
    if status.phase == RestorePhase::Deferred {
        // The hold is gone: re-enter Admitting and revalidate (the bound restarts).
        let message = format!(
            "restore of {site} re-enters Admitting: the failover-hold was released or lapsed"
        );
        if let Some(status) = status_mut(memory) {
            status.admission = Admission::default();
            enter(status, RestorePhase::Admitting, now, message.clone());
        }
        plan.event(EventReason::RestoreAdmitting, message);
        return;
    }
    let Some(info) = backup_on(context, &site, &backup).cloned() else {
        if status_of(context, &site).is_some() {
            let listed: Vec<String> = status_of(context, &site)
                .map(|s| s.backups.iter().map(|b| b.name.clone()).collect())
                .unwrap_or_default();
            return fail(
                memory,
                plan,
                now,
                format!("backup {backup} is not on {site}'s volume (backups there: {listed:?})"),
            );
        }
        return wait_admission(
            memory,
            plan,
            now,
            format!("waiting for {site}'s sidecar to answer"),
        );
    };
    let backup_text = match info.gtid_set_for(status.method) {
        Ok(text) => text.to_string(),
        Err(why) => return fail(memory, plan, now, why),
    };
    let Some(backup_set) = parse(context, &backup_text) else {
        return fail(
            memory,
            plan,
            now,
            format!("the GTID set of backup {backup} does not parse: {backup_text:?}"),
        );
    };
    let planned_moving = memory.planned_failover.as_ref().is_some_and(|p| {
        matches!(
            p.phase,
            PlannedFailoverPhase::Draining | PlannedFailoverPhase::Promoting
        )
    });
    let promotion_open = memory
        .last_failover
        .as_ref()
        .is_some_and(|f| f.completed_at.is_none());
    // The last failover's loss is made exact this poll (its old primary is readable again):
    // that is measured first, against the data the restore is about to replace.
    let active_gtid = context.view(&memory.active_site).gtid.clone();
    let loss_pending = memory.last_failover.as_ref().is_some_and(|failover| {
        let demoted = memory
            .site(&failover.from)
            .is_some_and(|site| site.state == SiteState::Demoted);
        let remeasured = context
            .view(&failover.from)
            .gtid
            .as_ref()
            .zip(active_gtid.as_ref())
            .map(|(old, active)| {
                lost_transactions(old, &loss_baseline(context, memory, active)).count()
            });
        demoted
            && remeasured.is_some_and(|count| !failover.exact || count > failover.lost_transactions)
    });
    if loss_pending {
        return wait_admission(
            memory,
            plan,
            now,
            "waiting for the last failover's loss to be measured on its old primary".to_owned(),
        );
    }
    // An ordered update's step in flight (a site being recreated, or its planned failover)
    // is a planned disruption too: fencing the active site meanwhile would take a second
    // site out of service at once (simulator seed 10, `--all-faults --restore
    // --image-update`: iad recreated and pdx fenced in one decision). The update starts no
    // step while a restore is pending, and it decides first in a poll, so one that started
    // a step this poll is seen here.
    let update_step_in_flight = memory.ordered_update.as_ref().is_some_and(|update| {
        matches!(
            update.phase,
            OrderedUpdatePhase::RollingReplica
                | OrderedUpdatePhase::RollingOldActive
                | OrderedUpdatePhase::FailingOver
        )
    });
    if update_step_in_flight {
        return wait_admission(
            memory,
            plan,
            now,
            format!(
                "waiting for the ordered update's step in flight to finish before fencing {site}"
            ),
        );
    }
    // A rejoin re-seeds its site from the active site: the active site is not fenced and
    // restored under it (the re-seed would copy a half-loaded site).
    if let Some(rejoining) = super::rejoin::in_flight_site(memory) {
        return wait_admission(
            memory,
            plan,
            now,
            format!("waiting for the rejoin of {rejoining} to finish before fencing {site}"),
        );
    }
    let refencing = holds_fenced(memory).is_some();
    if !(memory.authority.is_valid() || refencing) || planned_moving || promotion_open {
        return wait_admission(
            memory,
            plan,
            now,
            format!("waiting for a valid authority on {site} and no failover in flight"),
        );
    }
    // The restore id (the generation the re-promotion takes) must be one the site's sidecar
    // has no job under: the sidecar answers a request for the job it has with that job, run
    // or not, so an id an earlier attempt used would hand this attempt that attempt's outcome.
    // Such an attempt is one that failed (its generation was never taken), or one memory
    // forgot (a status reverted while it ran: simulator seed 880 with every fault mode, where
    // the forgotten load's success was taken for this one's over the writes taken since, and
    // the restore failed leaving the site fenced for good).
    let spent = status_of(context, &site)
        .and_then(|reading| reading.job.as_ref())
        .filter(|job| job.kind == JobKind::Restore)
        .map_or(0, |job| job.restore_id.saturating_add(1));
    let generation = memory.next_generation().max(spent);
    let message = format!(
        "restore of {site} from backup {backup} ({}): {site} fenced (role=fenced, read_only, connections killed)",
        method_words(status.method)
    );
    if let Some(status) = status_mut(memory) {
        status.admission = Admission::default();
        status.topology_generation = Some(generation);
        status.backup_gtid_set = Some(backup_set.to_string());
        enter(status, RestorePhase::Fencing, now, message.clone());
    }
    plan.cross_site(fence_action(context, memory, &site, true));
    plan.event(EventReason::RestoreFencing, message);
}

fn wait_admission(memory: &mut GroupMemory, plan: &mut Plan, now: Timestamp, message: String) {
    let Some(status) = status_mut(memory) else {
        return;
    };
    let bound = if retries_held_site(status) {
        RESTORE_RETRY_TIMEOUT
    } else {
        RESTORE_ADMISSION_TIMEOUT
    };
    if phase_age(status, now) > bound {
        return fail(
            memory,
            plan,
            now,
            format!("not admitted within {bound:?}: {message}"),
        );
    }
    status.message = Some(message);
}

/// Whether the restore `status` records is a retry on a site a failed load left fenced (it
/// carries that load's `fencedAt`, and no re-promotion): the site is out of service and its
/// data may be partly restored whatever this attempt does. Failing the attempt early gives
/// nothing back, it only leaves the active site fenced until a human asks again (simulator
/// seed 6334 with every fault mode and `--rejoin`: the retry's fence was not confirmed within
/// [`RESTORE_FENCE_TIMEOUT`] while iad's mysqld was down and then cut off, and iad stayed
/// fenced for good). So its waits are bounded by [`RESTORE_RETRY_TIMEOUT`], and a fence not
/// confirmed re-asserts nothing.
fn retries_held_site(status: &RestoreStatus) -> bool {
    status.fenced_at.is_some() && status.promoted_at.is_none()
}

fn fencing(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    let now = context.now;
    let Some(status) = memory.restore.as_ref().map(|r| r.status.clone()) else {
        return;
    };
    let site = status.site.clone();
    let view = context.view(&site);
    let fence_in_force = status_of(context, &site).is_some_and(|s| s.fence.is_some());
    // Detached too: a site still applying a relay log under the fence would commit more after
    // its set was read, and the recorded loss would miss those.
    if fence_in_force && view.mysql_up && view.read_only == Some(true) && view.detached() {
        if let Some(gtid) = view.gtid.clone() {
            let id = status
                .topology_generation
                .unwrap_or(memory.next_generation());
            let message = format!(
                "restore of {site}: mysqld read-only under the fence at GTID set {gtid}; loading backup {}",
                status.backup
            );
            if let Some(status) = status_mut(memory) {
                status.fenced_at = status.fenced_at.or(Some(now));
                status.fenced_gtid_set = status
                    .fenced_gtid_set
                    .clone()
                    .or_else(|| Some(gtid.to_string()));
                enter(status, RestorePhase::Restoring, now, message.clone());
            }
            plan.cross_site(restore_action(context, &site, &status, id));
            plan.event(EventReason::RestoreRestoring, message);
            return;
        }
    }
    if retries_held_site(&status) {
        // The site stays fenced whatever happens: wait for it to answer read-only under the
        // fence, re-asserting nothing.
        if phase_age(&status, now) > RESTORE_RETRY_TIMEOUT {
            return fail(
                memory,
                plan,
                now,
                format!(
                    "{site} was not confirmed read-only under the fence within {RESTORE_RETRY_TIMEOUT:?}; nothing more was loaded"
                ),
            );
        }
        plan.cross_site(fence_action(context, memory, &site, false));
        return;
    }
    if phase_age(&status, now) > RESTORE_FENCE_TIMEOUT {
        // Nothing was loaded: give the site its authority back under a new generation (the
        // fence lifts only at a greater one).
        memory.advance_generation();
        memory.authority_issued_at = Some(now);
        plan.cross_site(Action::RevokeDeployLeases {
            reason: RevokeReason::TopologyChanged,
            topology_generation: memory.topology_generation,
        });
        return fail(
            memory,
            plan,
            now,
            format!(
                "{site} was not confirmed read-only under the fence within {RESTORE_FENCE_TIMEOUT:?}; nothing was loaded and {site} is re-asserted at generation {}",
                memory.topology_generation
            ),
        );
    }
    plan.cross_site(fence_action(context, memory, &site, false));
}

fn restore_action(context: &Context<'_>, site: &str, status: &RestoreStatus, id: u64) -> Action {
    Action::Restore {
        site: site.to_string(),
        request: RestoreRequest {
            group: context.group().to_string(),
            name: status.backup.clone(),
            restore_id: id,
            method: status.method,
        },
    }
}

fn restoring(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    let now = context.now;
    let Some(status) = memory.restore.as_ref().map(|r| r.status.clone()) else {
        return;
    };
    let site = status.site.clone();
    let id = status
        .topology_generation
        .unwrap_or(memory.next_generation());
    // Keep the fence (a restarted sidecar forgot it) without killing the load's connection.
    plan.cross_site(fence_action(context, memory, &site, false));
    let job = job_of(context, &site, JobKind::Restore, &status.backup, id).cloned();
    match job.as_ref().map(|job| job.state) {
        Some(JobState::Failed) => {
            let why = job
                .and_then(|job| job.message)
                .unwrap_or_else(|| "the sidecar reported the load failed".to_owned());
            return fail(memory, plan, now, why);
        }
        Some(JobState::Succeeded) => return restored(context, memory, plan),
        Some(JobState::Running) => {}
        None => plan.cross_site(restore_action(context, &site, &status, id)),
    }
    if phase_age(&status, now) > RESTORE_LOAD_TIMEOUT {
        fail(
            memory,
            plan,
            now,
            format!("the load did not finish within {RESTORE_LOAD_TIMEOUT:?}"),
        );
    }
}

/// The sidecar reports the load done: check the site holds exactly the backup's set, then
/// re-promote it and record what was lost.
fn restored(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    let now = context.now;
    let Some(status) = memory.restore.as_ref().map(|r| r.status.clone()) else {
        return;
    };
    let site = status.site.clone();
    let view = context.view(&site);
    let backup_set = status
        .backup_gtid_set
        .as_deref()
        .and_then(|t| parse(context, t));
    let (Some(backup_set), Some(now_set)) = (backup_set, view.gtid.clone()) else {
        return;
    };
    if now_set != backup_set || view.read_only != Some(true) {
        return fail(
            memory,
            plan,
            now,
            format!(
                "the sidecar reported the load done, but {site} reads GTID set {now_set} (read_only {:?}), not the backup's {backup_set}",
                view.read_only
            ),
        );
    }
    let fenced = status
        .fenced_gtid_set
        .as_deref()
        .and_then(|t| parse(context, t));
    // Numbers an earlier restore discarded may have been reused since: they vouch for no
    // shared history with a backup taken before that restore (simulator seeds 3181, 9979).
    let reused = status
        .earlier_discarded_gtid_set
        .as_deref()
        .and_then(|t| parse(context, t));
    let lost = fenced.as_ref().map(|fenced| match &reused {
        Some(reused) => lost_transactions_across_rewind(fenced, &backup_set, reused),
        None => lost_transactions(fenced, &backup_set),
    });
    let generation = status
        .topology_generation
        .unwrap_or(memory.next_generation())
        .max(memory.next_generation());
    memory.take_generation(generation);
    memory.authority_issued_at = Some(now);
    // The generation is noted beside the status (`last-failover`, kind `restore`): a status
    // reverted to before this restore adopts it rather than issue it again to another site
    // (simulator seed 779 with every fault mode on).
    let note = FailoverNote {
        kind: PromotionKind::Restore,
        from: site.clone(),
        to: site.clone(),
        promoted_at: now,
        topology_generation: generation,
        restore: Some(RestoreNote {
            source: RestoreSource {
                backup: status.backup.clone(),
                method: status.method,
            },
            discarded: lost.as_ref().map(ToString::to_string),
        }),
    };
    plan.tail(Action::Annotate(AnnotationChange::SetLastFailover(
        note.to_string(),
    )));
    // The request is spent once the site is re-promoted: removed now rather than at
    // completion, so that a status reverted to before this restore (which forgets it ran)
    // finds no request to run again over the writes taken since (simulator seed 763 with
    // every fault mode: the same request ran three times and the last left pdx fenced for
    // good). Intake still removes it at completion if this write was lost.
    plan.tail(Action::Annotate(AnnotationChange::ClearRestore));
    plan.cross_site(Action::RevokeDeployLeases {
        reason: RevokeReason::TopologyChanged,
        topology_generation: generation,
    });
    let count = lost.as_ref().map_or(0, GtidSet::count);
    // Every other site not holding exactly the backup's set is withheld from now on (never
    // repointed, never healthy) until re-seeded; one holding it is repointed.
    let mut pending = Vec::new();
    // A demoted old primary is never re-seeded: its errant transactions and the loss of the
    // failover that demoted it are measured on its own data (returning-primary fencing keeps
    // it fenced while it holds transactions the restored site lacks).
    let replicas: Vec<String> = memory
        .sites
        .iter()
        .filter(|entry| entry.site != site && entry.state == SiteState::Replica)
        .map(|entry| entry.site.clone())
        .collect();
    for name in replicas.iter().map(String::as_str) {
        let holds_backup = context
            .view(name)
            .gtid
            .as_ref()
            .is_some_and(|gtid| *gtid == backup_set);
        if holds_backup {
            plan.cross_site(repoint_action(context, name, &site));
        } else {
            pending.push(name.to_string());
        }
    }
    let message = format!(
        "restore of {site} from {} ({}): loaded; {site} re-promoted at topology generation {generation}; {count} transactions after the backup discarded{}",
        status.backup,
        method_words(status.method),
        lost.as_ref()
            .filter(|l| !l.is_empty())
            .map(|l| format!(" ({l})"))
            .unwrap_or_default()
    );
    if let Some(status) = status_mut(memory) {
        status.restored_at = Some(now);
        status.promoted_at = Some(now);
        status.topology_generation = Some(generation);
        status.lost_transactions = count;
        status.lost_gtid_set = lost.as_ref().map(ToString::to_string);
        status.exact = lost.is_some();
        status.pending_reseed = pending;
        enter(status, RestorePhase::Promoting, now, message.clone());
    }
    plan.event(EventReason::RestorePromoted, message);
    track_reseeds(context, memory, plan);
}

fn promoting(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    let now = context.now;
    if !track_reseeds(context, memory, plan) {
        return;
    }
    let Some(status) = memory.restore.as_ref().map(|r| r.status.clone()) else {
        return;
    };
    if !memory.authority.is_valid() {
        if phase_age(&status, now) > RESTORE_SETTLE_TIMEOUT {
            fail(
                memory,
                plan,
                now,
                format!(
                    "{} was not writable again within {RESTORE_SETTLE_TIMEOUT:?}",
                    status.site
                ),
            );
        }
        return;
    }
    if status.pending_reseed.is_empty() {
        return complete(memory, plan, now);
    }
    let message = format!(
        "restore of {}: writable again; re-seeding {:?} from it (their GTID sets are not the backup's)",
        status.site, status.pending_reseed
    );
    if let Some(status) = status_mut(memory) {
        enter(status, RestorePhase::Reseeding, now, message.clone());
    }
    plan.event(EventReason::RestoreReseeding, message);
}

fn reseeding(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    let now = context.now;
    let Some(since) = memory.restore.as_ref().map(|r| r.status.clone()) else {
        return;
    };
    if !track_reseeds(context, memory, plan) {
        return;
    }
    let pending_left = memory
        .restore
        .as_ref()
        .is_some_and(|r| !r.status.pending_reseed.is_empty());
    if !pending_left {
        return complete(memory, plan, now);
    }
    if phase_age(&since, now) > RESTORE_SETTLE_TIMEOUT {
        fail(
            memory,
            plan,
            now,
            format!("re-seeding did not finish within {RESTORE_SETTLE_TIMEOUT:?}"),
        );
    }
}

/// The re-seed request for the sites awaiting theirs: from the active site (the restored
/// one, unless an emergency failover moved the authority since), under the restore's id.
fn reseed_request(
    context: &Context<'_>,
    memory: &GroupMemory,
    status: &RestoreStatus,
) -> ReseedRequest {
    reseed_request_from(
        context,
        &memory.active_site,
        status
            .topology_generation
            .unwrap_or(memory.topology_generation),
    )
}

/// The request to re-seed a site from `source` (its internal Service) under the job id `id`
/// (a restore's id, or a rejoin's: `engine::rejoin`).
pub(super) fn reseed_request_from(context: &Context<'_>, source: &str, id: u64) -> ReseedRequest {
    ReseedRequest {
        group: context.group().to_string(),
        restore_id: id,
        source_host: source_host_of(context, source),
        source_port: names::PORT_MYSQL,
    }
}

/// Where one site's re-seed is, by what its sidecar reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum ReseedProgress {
    /// The sidecar reports it done: the site holds a fresh dump of the source and replicates
    /// from it.
    Succeeded,
    /// The sidecar reports it failed, saying why.
    Failed(String),
    /// It runs, or it was asked for this poll.
    Running,
}

/// Follows the re-seed of `site` for `request`: what its sidecar reports, and the `Reseed`
/// action (idempotent) while it reports none. Shared by the restore's re-seeds and the rejoin
/// of a returning primary.
pub(super) fn advance_reseed(
    context: &Context<'_>,
    plan: &mut Plan,
    site: &str,
    request: &ReseedRequest,
) -> ReseedProgress {
    match reseed_job(context, site, request).map(|job| (job.state, job.message.clone())) {
        Some((JobState::Succeeded, _)) => ReseedProgress::Succeeded,
        Some((JobState::Failed, why)) => ReseedProgress::Failed(
            why.unwrap_or_else(|| "the sidecar reported it failed".to_owned()),
        ),
        Some((JobState::Running, _)) => ReseedProgress::Running,
        None => {
            plan.cross_site(Action::Reseed {
                site: site.to_string(),
                request: request.clone(),
            });
            ReseedProgress::Running
        }
    }
}

/// The re-seed job `site`'s sidecar reports for `request`, if any.
fn reseed_job<'a>(
    context: &'a Context<'_>,
    site: &str,
    request: &ReseedRequest,
) -> Option<&'a JobStatus> {
    let job_name = format!("{}:{}", request.source_host, request.source_port);
    job_of(
        context,
        site,
        JobKind::Reseed,
        &job_name,
        request.restore_id,
    )
}

/// Records the sites whose re-seed the observation shows done, asking for nothing.
fn record_reseeds(context: &Context<'_>, memory: &mut GroupMemory) {
    let Some(status) = memory.restore.as_ref().map(|r| r.status.clone()) else {
        return;
    };
    let request = reseed_request(context, memory, &status);
    let done: Vec<String> = status
        .pending_reseed
        .iter()
        .filter(|site| {
            reseed_job(context, site, &request).is_some_and(|job| job.state == JobState::Succeeded)
        })
        .cloned()
        .collect();
    mark_reseeded(memory, done);
}

fn mark_reseeded(memory: &mut GroupMemory, done: Vec<String>) {
    if let Some(status) = status_mut(memory) {
        status.pending_reseed.retain(|site| !done.contains(site));
        status.reseeded.extend(done);
    }
}

/// Asks every site awaiting its re-seed for it (from the active site, also while that is
/// still read-only: a dump needs no writes) and records the ones done. `false`: one failed
/// and the restore stopped.
fn track_reseeds(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) -> bool {
    let now = context.now;
    let Some(status) = memory.restore.as_ref().map(|r| r.status.clone()) else {
        return false;
    };
    let active = memory.active_site.clone();
    let request = reseed_request(context, memory, &status);
    let mut done = Vec::new();
    for site in &status.pending_reseed {
        match advance_reseed(context, plan, site, &request) {
            ReseedProgress::Succeeded => done.push(site.clone()),
            ReseedProgress::Failed(why) => {
                fail(
                    memory,
                    plan,
                    now,
                    format!(
                        "re-seeding {site} from {active} failed: {why}; {site} is not repointed"
                    ),
                );
                return false;
            }
            ReseedProgress::Running => {}
        }
    }
    mark_reseeded(memory, done);
    true
}

fn complete(memory: &mut GroupMemory, plan: &mut Plan, now: Timestamp) {
    let Some(status) = status_mut(memory) else {
        return;
    };
    let message = format!(
        "restore of {} from {} ({}) completed: {} transactions discarded{}; re-seeded {:?}",
        status.site,
        status.backup,
        method_words(status.method),
        status.lost_transactions,
        status
            .lost_gtid_set
            .as_deref()
            .filter(|set| !set.is_empty())
            .map(|set| format!(" ({set})"))
            .unwrap_or_default(),
        status.reseeded
    );
    status.completed_at = Some(now);
    enter(status, RestorePhase::Completed, now, message.clone());
    plan.event(EventReason::RestoreCompleted, message);
    plan.tail(Action::Annotate(AnnotationChange::ClearRestore));
}
