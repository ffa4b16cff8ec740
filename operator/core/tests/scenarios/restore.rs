//! Core scenarios: named backups and restore-in-place of the active site
//! (docs/design/history.md#issue-12-part-2;
//! docs/design/operator.md#ordered-update-and-restore-in-place; docs/design/requirements.md
//! R000.9 and R003.17).

use crate::support::{labels_of, World};
use bloodraven_api::{BackupPhase, DeferReason, RestorePhase};
use bloodraven_core::deploy::{DisruptionKind, HoldInfo, RevokeReason};
use bloodraven_core::engine::{
    deferrable_disruption_in_flight, gated_start, Action, EventReason, GroupMemory, PodRole,
    PromotionKind,
};
use bloodraven_core::time::Duration;
use bloodraven_mysql::GtidSet;

fn phase(world: &World) -> Option<RestorePhase> {
    world.memory.restore.as_ref().map(|r| r.status.phase)
}

/// A bootstrapped world with three writes on iad, then a backup `b1` of iad.
fn backed_up() -> World {
    let mut world = World::bootstrapped();
    for _ in 0..3 {
        assert!(world.write("iad"));
    }
    world.run_polls(1);
    world.annotations.backup = Some("b1".to_string());
    for _ in 0..3 {
        world.run_polls(1);
    }
    let backup = world.memory.last_backup.clone().expect("backup status");
    assert_eq!(backup.phase, BackupPhase::Completed, "{backup:?}");
    assert_eq!(backup.site, "iad");
    assert_eq!(
        backup.gtid_set.as_deref(),
        Some(world.site("iad").gtid.to_string().as_str())
    );
    assert_eq!(world.annotations.backup, None, "the annotation is removed");
    assert_eq!(world.events_of(EventReason::BackupCompleted).len(), 1);
    world
}

fn run_to_final(world: &mut World) -> Vec<RestorePhase> {
    let mut phases = Vec::new();
    for _ in 0..40 {
        world.run_polls(1);
        if let Some(current) = phase(world) {
            if phases.last() != Some(&current) {
                phases.push(current);
            }
            if matches!(current, RestorePhase::Completed | RestorePhase::Failed) {
                break;
            }
        }
    }
    phases
}

/// Every pod restarts and forgets its authority, and the status reverts to `reverted`.
fn restart_all_and_revert(world: &mut World, reverted: GroupMemory) {
    for name in ["iad", "pdx", "reader"] {
        world.restart(name);
        let site = world.site_mut(name);
        site.latest_authority = None;
        site.known_generation = None;
    }
    world.memory = reverted;
}

/// The `last-failover` note the operator wrote last (well formed).
fn noted(world: &World) -> bloodraven_core::engine::FailoverNote {
    world
        .annotations
        .last_failover
        .clone()
        .expect("noted")
        .expect("well formed")
        .note
}

/// Requests the restore from `b1` and polls until it is `Reseeding`.
fn restore_until_reseeding(world: &mut World) {
    world.annotations.restore = Some("b1".to_string());
    poll_until_reseeding(world);
}

/// Polls (at most 40) until the restore is `Reseeding`.
fn poll_until_reseeding(world: &mut World) {
    for _ in 0..40 {
        world.run_polls(1);
        if phase(world) == Some(RestorePhase::Reseeding) {
            return;
        }
    }
    assert_eq!(phase(world), Some(RestorePhase::Reseeding));
}

fn pushes_naming(decision: &bloodraven_core::engine::Decision, site: &str) -> bool {
    decision.actions.iter().any(|action| {
        matches!(action, Action::PushAuthority { authority, .. }
            if authority.active_site.as_deref() == Some(site))
    })
}

#[test]
fn restore_in_place_fences_restores_repromotes_bumps_generation_and_revokes_leases() {
    let mut world = backed_up();
    let backup_set = world.site("iad").gtid.clone();
    // Two transactions after the backup: what the restore discards.
    assert!(world.write("iad"));
    assert!(world.write("iad"));
    world.run_polls(1);
    let fenced_set = world.site("iad").gtid.clone();
    let generation = world.memory.topology_generation;
    let revocations_before = world.revocations.len();
    world.annotations.restore = Some("b1".to_string());

    let phases = run_to_final(&mut world);
    assert_eq!(
        phases,
        vec![
            RestorePhase::Fencing,
            RestorePhase::Restoring,
            RestorePhase::Promoting,
            RestorePhase::Completed
        ],
        "the re-seeds finish while the site becomes writable again (instant in this world)"
    );
    let status = world.memory.restore.clone().expect("restore status").status;
    // Re-promoted at generation + 1, every deploy lease revoked with TopologyChanged.
    assert_eq!(world.memory.topology_generation, generation + 1);
    assert_eq!(status.topology_generation, Some(generation + 1));
    assert!(world.revocations[revocations_before..]
        .contains(&(RevokeReason::TopologyChanged, generation + 1)));
    assert_eq!(world.memory.active_site, "iad");
    assert!(world.memory.authority.is_valid());
    // What was lost: exactly the two transactions after the backup.
    let lost = bloodraven_mysql::lost_transactions(&fenced_set, &backup_set);
    assert_eq!(lost.count(), 2);
    assert_eq!(status.lost_transactions, 2);
    assert_eq!(status.lost_gtid_set, Some(lost.to_string()));
    assert!(status.exact);
    // The replicas held those two: re-seeded, now holding exactly iad's set, replicating.
    assert_eq!(
        status.reseeded,
        vec!["pdx".to_string(), "reader".to_string()]
    );
    assert!(status.pending_reseed.is_empty());
    world.run_polls(2);
    for replica in ["pdx", "reader"] {
        assert_eq!(
            world.site(replica).gtid,
            world.site("iad").gtid,
            "{replica}"
        );
        assert_eq!(world.site(replica).source.as_deref(), Some("iad"));
    }
    assert!(world.split_brain_at.is_empty());
    assert_eq!(world.annotations.restore, None);
    assert_eq!(world.events_of(EventReason::RestoreCompleted).len(), 1);
    assert!(world.write("iad"), "iad takes writes again");
    assert!(
        !world.site("iad").gtid.contains(&lost),
        "the discarded ones stay gone"
    );
}

#[test]
fn seed_000_the_restored_pod_is_fenced_at_once_and_no_authority_is_pushed_while_it_is() {
    let mut world = backed_up();
    world.annotations.restore = Some("b1".to_string());
    let mut saw_restore = false;
    for _ in 0..40 {
        world.run_polls(1);
        let decision = world.decisions.last().expect("decision").1.clone();
        let current = phase(&world).expect("phase");
        match current {
            RestorePhase::Fencing | RestorePhase::Restoring => {
                assert_eq!(
                    labels_of(&decision, "iad"),
                    Some((PodRole::Fenced, false)),
                    "{current:?}: iad leaves both shared Services"
                );
                assert!(
                    !pushes_naming(&decision, "iad"),
                    "{current:?}: no authority pushed"
                );
                saw_restore |= decision
                    .actions
                    .iter()
                    .any(|action| matches!(action, Action::Restore { .. }));
            }
            RestorePhase::Completed => break,
            _ => {}
        }
    }
    assert!(saw_restore);
    assert_eq!(phase(&world), Some(RestorePhase::Completed));
    let last = world.decisions.last().expect("decision").1.clone();
    assert_eq!(labels_of(&last, "iad"), Some((PodRole::Primary, true)));
}

#[test]
fn seed_003_a_live_failover_hold_defers_the_restore_until_it_lapses() {
    let mut world = backed_up();
    let expiry = world.now + Duration::from_secs(20);
    world.hold = Some(HoldInfo {
        operation_id: "a1c3f0e2".to_string(),
        instance: "counter-app".to_string(),
        earliest_expiry: expiry,
    });
    world.annotations.restore = Some("b1".to_string());
    for _ in 0..4 {
        let before = world.memory.clone();
        let decision = world.poll();
        world.advance(world.spec.poll_interval.get());
        assert_eq!(gated_start(&before, &decision.memory), None);
        assert!(!decision
            .actions
            .iter()
            .any(|action| matches!(action, Action::Fence { .. } | Action::Restore { .. })));
    }
    let status = world.memory.restore.clone().expect("restore").status;
    assert_eq!(status.phase, RestorePhase::Deferred);
    assert_eq!(
        status.admission.defer_reason,
        Some(DeferReason::DeploymentHold)
    );
    assert_eq!(status.admission.retry_time, Some(expiry));
    assert!(status
        .admission
        .message
        .as_deref()
        .is_some_and(|m| m.contains("a1c3f0e2") && m.contains("counter-app")));
    assert_eq!(world.events_of(EventReason::RestoreDeferred).len(), 1);
    // The hold lapses: admitted again, and the decision that fences is the gated start.
    world.hold = None;
    let mut started = None;
    for _ in 0..4 {
        let before = world.memory.clone();
        let decision = world.poll();
        world.advance(world.spec.poll_interval.get());
        if let Some(start) = gated_start(&before, &decision.memory) {
            started = Some(start);
            break;
        }
    }
    let start = started.expect("a gated start");
    assert_eq!(start.kind, DisruptionKind::RestoreInPlace);
    assert_eq!(start.from, "iad");
    assert!(deferrable_disruption_in_flight(&world.memory));
    run_to_final(&mut world);
    assert_eq!(phase(&world), Some(RestorePhase::Completed));
    assert!(!deferrable_disruption_in_flight(&world.memory));
}

#[test]
fn a_backup_that_is_not_on_the_active_site_fails_the_restore_and_nothing_is_fenced() {
    let mut world = World::bootstrapped();
    world.annotations.restore = Some("nope".to_string());
    run_to_final(&mut world);
    let status = world.memory.restore.clone().expect("restore").status;
    assert_eq!(status.phase, RestorePhase::Failed);
    let message = status.message.unwrap_or_default();
    assert!(message.contains("nope is not on iad's volume"), "{message}");
    assert!(!world
        .decisions
        .iter()
        .any(|(_, d)| d.actions.iter().any(|a| matches!(a, Action::Fence { .. }))));
    assert!(world.memory.authority.is_valid());
    assert_eq!(world.annotations.restore, None);
    assert_eq!(world.events_of(EventReason::RestoreFailed).len(), 1);
}

#[test]
fn a_failed_load_stops_the_restore_and_the_site_stays_fenced_until_a_new_restore() {
    let mut world = backed_up();
    let generation = world.memory.topology_generation;
    world.site_mut("iad").job_fails = Some("load dump.sql: ERROR 1064".to_string());
    world.annotations.restore = Some("b1".to_string());
    run_to_final(&mut world);
    let status = world.memory.restore.clone().expect("restore").status;
    assert_eq!(status.phase, RestorePhase::Failed);
    let message = status.message.clone().unwrap_or_default();
    assert!(
        message.contains("ERROR 1064") && message.contains("stays fenced"),
        "{message}"
    );
    // Many polls later: still fenced, nobody promoted, no authority naming iad pushed.
    for _ in 0..15 {
        world.run_polls(1);
        let decision = &world.decisions.last().expect("decision").1;
        assert_eq!(labels_of(decision, "iad"), Some((PodRole::Fenced, false)));
        assert!(!pushes_naming(decision, "iad"));
    }
    assert!(
        world.events_of(EventReason::Promoted).is_empty(),
        "no failover on top"
    );
    assert_eq!(world.memory.topology_generation, generation);
    assert!(world.writable_sites().is_empty());
    // A sidecar restart forgets the fence: it is fenced again, still no authority.
    world.restart_sidecar("iad");
    world.run_polls(2);
    assert!(world.site("iad").fence_generation.is_some());
    assert!(world.writable_sites().is_empty());
    // The way on: request the restore again (the load works now). The sidecar keeps the
    // failed job under its restore id and answers a request for that id with it, so the new
    // attempt takes the next id: the load runs, and the re-promotion takes that generation.
    world.site_mut("iad").job_fails = None;
    world.run_polls(1);
    world.annotations.restore = Some("b1".to_string());
    run_to_final(&mut world);
    assert_eq!(phase(&world), Some(RestorePhase::Completed));
    assert_eq!(world.memory.topology_generation, generation + 2);
    assert!(world.memory.authority.is_valid());
}

#[test]
fn a_replica_holding_exactly_the_backup_is_repointed_not_reseeded() {
    let mut world = backed_up();
    world.annotations.restore = Some("b1".to_string());
    let phases = run_to_final(&mut world);
    assert_eq!(phases.last(), Some(&RestorePhase::Completed));
    assert!(!phases.contains(&RestorePhase::Reseeding), "{phases:?}");
    let status = world.memory.restore.clone().expect("restore").status;
    assert_eq!(status.lost_transactions, 0);
    assert!(status.reseeded.is_empty());
    assert!(!world
        .decisions
        .iter()
        .any(|(_, d)| d.actions.iter().any(|a| matches!(a, Action::Reseed { .. }))));
}

#[test]
fn a_restore_resumes_from_status_after_an_operator_restart() {
    let mut world = backed_up();
    assert!(world.write("iad"));
    world.run_polls(1);
    world.site_mut("iad").job_hangs = true;
    world.annotations.restore = Some("b1".to_string());
    for _ in 0..4 {
        world.run_polls(1);
    }
    assert_eq!(phase(&world), Some(RestorePhase::Restoring));
    // Restart: memory from the persisted status only.
    let status = world.memory.to_status();
    world.memory = GroupMemory::from_status(&world.spec, Some(&status), world.now);
    assert_eq!(phase(&world), Some(RestorePhase::Restoring));
    world.site_mut("iad").job_hangs = false;
    world.site_mut("iad").job = None;
    run_to_final(&mut world);
    let status = world.memory.restore.clone().expect("restore").status;
    assert_eq!(status.phase, RestorePhase::Completed, "{status:?}");
    assert_eq!(status.lost_transactions, 1);
}

#[test]
fn a_replica_ahead_of_the_backup_is_never_repointed_before_its_reseed() {
    let mut world = backed_up();
    assert!(world.write("iad"));
    world.run_polls(1);
    world.site_mut("pdx").job_hangs = true;
    world.annotations.restore = Some("b1".to_string());
    let from = world.decisions.len();
    for _ in 0..12 {
        world.run_polls(1);
    }
    assert_eq!(phase(&world), Some(RestorePhase::Reseeding));
    let status = world.memory.restore.clone().expect("restore").status;
    assert!(status.pending_reseed.contains(&"pdx".to_string()));
    let backup_set: GtidSet = world.site("iad").gtid.clone();
    assert!(!backup_set.contains(&world.site("pdx").gtid));
    for (_, decision) in &world.decisions[from..] {
        assert!(!decision.actions.iter().any(|a| matches!(a,
            Action::Repoint { site, .. } if site == "pdx")));
    }
    let last = &world.decisions.last().expect("decision").1;
    assert_eq!(labels_of(last, "pdx"), Some((PodRole::Replica, false)));
}

/// [`backed_up`] with a `mariadb-backup` copy in the backup, whose GTID set is one
/// transaction ahead of the dump's (a write acknowledged while the dump ran).
fn backed_up_with_a_copy() -> (World, GtidSet) {
    let mut world = World::bootstrapped();
    world.backups_have_copies = true;
    for _ in 0..3 {
        assert!(world.write("iad"));
    }
    world.run_polls(1);
    world.annotations.backup = Some("b1".to_string());
    world.run_polls(3);
    assert!(world.write("iad"));
    let copy_set = world.site("iad").gtid.clone();
    let backup = world
        .site_mut("iad")
        .backups
        .iter_mut()
        .find(|b| b.name == "b1")
        .expect("b1");
    assert!(backup.physical);
    backup.physical_gtid_set = Some(copy_set.to_string());
    (world, copy_set)
}

#[test]
fn issue_12_a_physical_restore_keeps_exactly_the_copys_set_and_records_its_method() {
    let (mut world, copy_set) = backed_up_with_a_copy();
    // Two more after the copy: what the restore discards (not the one inside the copy).
    assert!(world.write("iad"));
    assert!(world.write("iad"));
    world.run_polls(1);
    let fenced_set = world.site("iad").gtid.clone();
    let generation = world.memory.topology_generation;
    world.annotations.restore = Some("b1,method=physical".to_string());
    let from = world.decisions.len();
    let phases = run_to_final(&mut world);
    assert_eq!(phases.last(), Some(&RestorePhase::Completed), "{phases:?}");
    let status = world.memory.restore.clone().expect("restore").status;
    assert_eq!(status.method, bloodraven_api::RestoreMethod::Physical);
    assert_eq!(status.backup, "b1");
    assert_eq!(status.backup_gtid_set, Some(copy_set.to_string()));
    assert_eq!(world.site("iad").gtid, copy_set);
    let lost = bloodraven_mysql::lost_transactions(&fenced_set, &copy_set);
    assert_eq!(lost.count(), 2);
    assert_eq!(status.lost_transactions, 2);
    assert_eq!(status.lost_gtid_set, Some(lost.to_string()));
    assert!(status.exact);
    assert_eq!(world.memory.topology_generation, generation + 1);
    // Every Restore the operator sent asked for the copy.
    let requests: Vec<_> = world.decisions[from..]
        .iter()
        .flat_map(|(_, d)| d.actions.iter())
        .filter_map(|a| match a {
            Action::Restore { request, .. } => Some(request.method),
            _ => None,
        })
        .collect();
    assert!(!requests.is_empty());
    assert!(requests
        .iter()
        .all(|m| *m == bloodraven_api::RestoreMethod::Physical));
    let message = status.message.unwrap_or_default();
    assert!(message.contains("completed"), "{message}");
    assert_eq!(world.annotations.restore, None);
}

#[test]
fn issue_12_a_physical_request_for_a_backup_without_a_copy_fails_naming_it() {
    let mut world = backed_up();
    world.annotations.restore = Some("b1,method=physical".to_string());
    run_to_final(&mut world);
    let status = world.memory.restore.clone().expect("restore").status;
    assert_eq!(status.phase, RestorePhase::Failed);
    let message = status.message.unwrap_or_default();
    assert!(
        message.contains("no mariadb-backup copy") && message.contains("method=logical"),
        "{message}"
    );
    assert!(!world
        .decisions
        .iter()
        .any(|(_, d)| d.actions.iter().any(|a| matches!(a, Action::Fence { .. }))));
    assert!(world.memory.authority.is_valid());
    assert_eq!(world.annotations.restore, None);
}

#[test]
fn issue_12_a_restore_request_of_another_form_fails_naming_what_is_wrong() {
    let mut world = backed_up();
    world.annotations.restore = Some("b1,method=fast".to_string());
    run_to_final(&mut world);
    let status = world.memory.restore.clone().expect("restore").status;
    assert_eq!(status.phase, RestorePhase::Failed);
    let message = status.message.clone().unwrap_or_default();
    assert!(
        message.contains("\"fast\" is unknown") && message.contains("logical or physical"),
        "{message}"
    );
    assert_eq!(world.annotations.restore, None);
    assert_eq!(world.events_of(EventReason::RestoreFailed).len(), 1);
    assert!(!world
        .decisions
        .iter()
        .any(|(_, d)| d.actions.iter().any(|a| matches!(a, Action::Fence { .. }))));
    // The explicit default is the logical restore, and is a new request.
    world.annotations.restore = Some("b1,method=logical".to_string());
    run_to_final(&mut world);
    let status = world.memory.restore.clone().expect("restore").status;
    assert_eq!(status.phase, RestorePhase::Completed, "{status:?}");
    assert_eq!(status.method, bloodraven_api::RestoreMethod::Logical);
}

// docs/design/history.md#issue-12: a physical restore stops the active site's mysqld (its
// sidecar answers). That is the restore holding the site, not a failed active site: no
// emergency failover however long it takes, the site stays fenced, and it is re-promoted once
// the copy is in place.
#[test]
fn issue_12_mysqld_down_during_a_physical_restore_is_no_reason_to_fail_over() {
    let (mut world, copy_set) = backed_up_with_a_copy();
    assert!(world.write("iad"));
    world.run_polls(1);
    let generation = world.memory.topology_generation;
    world.site_mut("iad").job_hangs = true;
    world.annotations.restore = Some("b1,method=physical".to_string());
    for _ in 0..6 {
        world.run_polls(1);
    }
    assert_eq!(phase(&world), Some(RestorePhase::Restoring));
    // mysqld stopped for the swap: many detection floors.
    world.site_mut("iad").mysql_up = false;
    let from = world.decisions.len();
    for _ in 0..30 {
        world.run_polls(1);
        let decision = &world.decisions.last().expect("decision").1;
        assert_eq!(labels_of(decision, "iad"), Some((PodRole::Fenced, false)));
        assert!(!pushes_naming(decision, "pdx") && !pushes_naming(decision, "iad"));
    }
    assert_eq!(phase(&world), Some(RestorePhase::Restoring));
    assert!(world
        .events_of(EventReason::EmergencyFailoverStarted)
        .is_empty());
    assert!(world.events_of(EventReason::Promoted).is_empty());
    assert!(world.memory.emergency_failover.is_none());
    assert_eq!(world.memory.active_site, "iad");
    assert_eq!(world.memory.topology_generation, generation);
    assert!(world.writable_sites().is_empty());
    assert!(!world.decisions[from..].iter().any(|(_, d)| d
        .actions
        .iter()
        .any(|a| matches!(a, Action::Promote { .. }))));
    // mysqld is back on the copy, read-only; the sidecar reports the job done.
    let iad = world.site_mut("iad");
    iad.mysql_up = true;
    iad.read_only = true;
    iad.gtid = copy_set.clone();
    let job = iad.job.as_mut().expect("the running job");
    job.state = bloodraven_api::sidecar::JobState::Succeeded;
    job.gtid_set = Some(copy_set.to_string());
    run_to_final(&mut world);
    let status = world.memory.restore.clone().expect("restore").status;
    assert_eq!(status.phase, RestorePhase::Completed, "{status:?}");
    assert_eq!(world.memory.topology_generation, generation + 1);
    assert_eq!(world.memory.active_site, "iad");
    assert!(world.memory.authority.is_valid());
    assert!(world
        .events_of(EventReason::EmergencyFailoverStarted)
        .is_empty());
}

/// Simulator seed 4162 (`--all-faults --restore --image-update`): a replica still awaiting its
/// re-seed after a restore holds what the restore discarded, not what the old primary
/// committed since. Counted as received from the old primary, it made an emergency failover's
/// lower bound of the loss larger than the loss itself (1,245 reported, 0 lost).
#[test]
fn sim_seed_4162_a_replica_awaiting_its_reseed_is_no_evidence_of_what_the_old_primary_committed() {
    let mut world = backed_up();
    // Two transactions after the backup, replicated everywhere: what the restore discards.
    assert!(world.write("iad"));
    assert!(world.write("iad"));
    world.run_polls(1);
    // The reader dies holding them: it is never re-seeded.
    world.kill("reader");
    restore_until_reseeding(&mut world);
    assert_eq!(phase(&world), Some(RestorePhase::Reseeding));
    world.run_polls(2);
    assert_eq!(
        world.site("pdx").gtid,
        world.site("iad").gtid,
        "pdx re-seeded and following iad"
    );
    // iad's mysqld crashes (its sidecar says so): pdx, holding everything iad holds, is
    // promoted and loses nothing.
    world.site_mut("iad").mysql_up = false;
    world.run_polls_until_active("pdx", 20);
    let record = world.memory.last_failover.clone().expect("lastFailover");
    assert_eq!((record.from.as_str(), record.to.as_str()), ("iad", "pdx"));
    assert_eq!(
        record.lost_transactions, 0,
        "the reader's discarded transactions counted as lost: {:?}",
        record.lost_gtid_set
    );
}

/// Takes the named backup of the active site (polls until it completed).
fn take_backup(world: &mut World, name: &str) {
    world.annotations.backup = Some(name.to_string());
    for _ in 0..5 {
        world.run_polls(1);
        if world.annotations.backup.is_none() {
            break;
        }
    }
    let backup = world.memory.last_backup.clone().expect("backup status");
    assert_eq!(
        (backup.name.as_str(), backup.phase),
        (name, BackupPhase::Completed)
    );
}

/// Simulator seed 3822 (`--all-faults --restore --image-update`): after an emergency failover
/// pdx -> iad whose old primary stayed unreadable, a restore of iad discarded transactions
/// iad had received from pdx, and a second restore request replaced `status.restore` before
/// pdx was readable again. Its loss was then made exact against iad without the first
/// restore's discards: 81 reported lost (exact), 5 lost. The restore history the new record
/// carries (`discardedSinceFailover`) keeps them in the baseline.
#[test]
fn sim_seed_3822_a_second_restore_request_keeps_the_first_ones_discards_out_of_the_failovers_loss()
{
    let mut world = backed_up();
    world.annotations.planned_failover = Some("pdx".to_string());
    world.run_polls_until_active("pdx", 20);
    // Past the cooldown of that promotion.
    world.run_polls(20);
    // pdx writes four transactions iad and the reader receive, then two nobody receives.
    for _ in 0..4 {
        assert!(world.write("pdx"));
    }
    world.run_polls(1);
    assert!(world.write("pdx"));
    assert!(world.write("pdx"));
    world.kill("pdx");
    world.run_polls_until_active("iad", 30);
    world.run_polls(3);
    let record = world.memory.last_failover.clone().expect("lastFailover");
    assert_eq!((record.from.as_str(), record.to.as_str()), ("pdx", "iad"));
    // iad writes, then is restored to b1 (taken before pdx's four): the restore discards
    // pdx's four and iad's three.
    for _ in 0..3 {
        assert!(world.write("iad"));
    }
    world.run_polls(1);
    world.annotations.restore = Some("b1".to_string());
    assert_eq!(
        run_to_final(&mut world).last(),
        Some(&RestorePhase::Completed)
    );
    let first = world.memory.restore.clone().expect("restore").status;
    assert_eq!(first.lost_transactions, 7);
    // A second request replaces the record (this one fails: no such backup).
    world.annotations.restore = Some("b9".to_string());
    world.run_polls(2);
    let second = world.memory.restore.clone().expect("restore").status;
    assert_eq!(
        (second.backup.as_str(), second.phase),
        ("b9", RestorePhase::Failed)
    );
    // pdx is readable again: the failover lost exactly its two unreplicated transactions.
    world.restart("pdx");
    world.run_polls(3);
    let record = world.memory.last_failover.clone().expect("lastFailover");
    assert!(record.exact, "{record:?}");
    assert_eq!(
        record.lost_transactions, 2,
        "the first restore's discards counted as the failover's: {:?}",
        record.lost_gtid_set
    );
}

/// Simulator seeds 3181 and 9979 (`--all-faults --restore --image-update`): a restore to a
/// backup taken before an earlier restore of the same site. The earlier restore rewound the
/// site and the history it wrote since reused the numbers it discarded; the backup holds some
/// of those numbers under another server id. The agreement point (the highest number both
/// hold under one server id) was a reused number, so everything below it was forgiven: 0
/// discarded recorded, exact. The numbers the earlier restores discarded
/// (`earlierDiscardedGtidSet`) vouch for no shared history.
#[test]
fn sim_seeds_3181_and_9979_a_restore_to_a_backup_older_than_an_earlier_restore_records_its_discards(
) {
    let mut world = backed_up();
    let iad = world.site("iad").server_id;
    let pdx = world.site("pdx").server_id;
    // iad holds five transactions pdx wrote while it was active, then five of its own.
    for _ in 0..5 {
        assert!(world.write_numbered_after_own("iad", pdx));
    }
    for _ in 0..5 {
        assert!(world.write_numbered_after_own("iad", iad));
    }
    world.run_polls(1);
    take_backup(&mut world, "b2");
    // Restored to b1: those ten are discarded.
    world.annotations.restore = Some("b1".to_string());
    assert_eq!(
        run_to_final(&mut world).last(),
        Some(&RestorePhase::Completed)
    );
    assert_eq!(
        world
            .memory
            .restore
            .as_ref()
            .map(|r| r.status.lost_transactions),
        Some(10)
    );
    world.run_polls(2);
    // iad writes eight more, reusing the ten numbers' first eight under its own server id.
    let before = world.site("iad").gtid.clone();
    for _ in 0..8 {
        assert!(world.write_numbered_after_own("iad", iad));
    }
    let rewritten = world.site("iad").gtid.subtract(&before);
    world.run_polls(1);
    // Restored to b2 (taken before the first restore): of the eight, the five numbered as
    // pdx's transactions in b2 are discarded; the three numbered as iad's own in b2 are not
    // (by GTID, which is all either side can tell).
    world.annotations.restore = Some("b2".to_string());
    assert_eq!(
        run_to_final(&mut world).last(),
        Some(&RestorePhase::Completed)
    );
    let status = world.memory.restore.clone().expect("restore").status;
    let b2 = world
        .site("iad")
        .backups
        .iter()
        .find(|backup| backup.name == "b2")
        .map(|backup| GtidSet::parse(before.flavor(), &backup.gtid_set).expect("b2 set"))
        .expect("b2");
    let discarded = rewritten.subtract(&b2);
    assert_eq!(discarded.count(), 5);
    assert!(status.exact);
    assert_eq!(
        (status.lost_transactions, status.lost_gtid_set.clone()),
        (5, Some(discarded.to_string())),
        "{status:?}"
    );
    assert!(status.earlier_discarded_gtid_set.is_some());
}

/// A world after `backed_up` and one more write, the memory it holds then (what a status
/// reverted to before the restore reads back), and the restore of b1 requested.
fn restore_requested() -> (World, GroupMemory) {
    let mut world = backed_up();
    assert!(world.write("iad"));
    world.run_polls(1);
    let reverted = world.memory.clone();
    world.annotations.restore = Some("b1".to_string());
    (world, reverted)
}

/// Simulator seed 779 with every fault mode on: a restore re-promoted iad at a new
/// generation, the status then reverted to a copy from before the restore while every sidecar
/// forgot its authority, and the next failover issued that same generation to pdx (a
/// generation the status history cannot explain). The re-promotion is noted in the
/// `last-failover` annotation (kind `restore`), so the reverted memory adopts its generation
/// (without starting a failover cooldown) and the failover issues the next one.
#[test]
fn sim_seed_779_a_reverted_status_adopts_the_generation_a_restore_issued() {
    let (mut world, reverted) = restore_requested();
    let generation = world.memory.topology_generation;
    let phases = run_to_final(&mut world);
    assert_eq!(phases.last(), Some(&RestorePhase::Completed), "{phases:?}");
    assert_eq!(world.memory.topology_generation, generation + 1);
    let note = noted(&world);
    assert_eq!(
        (
            note.kind,
            note.from.as_str(),
            note.to.as_str(),
            note.topology_generation
        ),
        (PromotionKind::Restore, "iad", "iad", generation + 1)
    );
    assert_eq!(note.to_string().split_whitespace().next(), Some("restore"));

    // The status reverts to before the restore; every pod restarts and forgets.
    restart_all_and_revert(&mut world, reverted);
    let cooldown_before = world.memory.cooldown_until;
    let first_event = world.events.len();
    world.run_polls(6);
    assert_eq!(
        (
            world.memory.active_site.as_str(),
            world.memory.topology_generation
        ),
        ("iad", generation + 1)
    );
    assert_eq!(
        world.memory.cooldown_until, cooldown_before,
        "a restore starts no cooldown"
    );
    assert!(world.events[first_event..].iter().any(|(_, event)| {
        event.reason == EventReason::AuthorityAdopted
            && event.message.contains(&format!(
                "names the restore re-promotion of iad at generation {}",
                generation + 1
            ))
    }));

    world.kill("iad");
    world.run_polls_until_active("pdx", 40);
    assert_eq!(world.memory.active_site, "pdx");
    assert_eq!(
        world.memory.topology_generation,
        generation + 2,
        "the failover issues a generation after the restore's, never the restore's again"
    );
    assert!(world.split_brain_at.is_empty());
}

/// Simulator seed 763 with every fault mode on: the status reverted to a copy from before a
/// restore that had re-promoted pdx, and the `restore` annotation, removed only at completion,
/// was still there: the reverted memory took it as a new request and restored again over the
/// writes acknowledged since the re-promotion (then a third time, which left pdx fenced). The
/// request is spent at the re-promotion: the annotation is removed then, and the reverted
/// memory runs nothing again.
#[test]
fn sim_seed_763_a_reverted_status_does_not_run_a_restore_again() {
    let (mut world, reverted) = restore_requested();
    for _ in 0..40 {
        world.run_polls(1);
        if phase(&world) == Some(RestorePhase::Promoting) {
            break;
        }
    }
    assert_eq!(phase(&world), Some(RestorePhase::Promoting));
    assert_eq!(world.annotations.restore, None, "spent at the re-promotion");
    let admitted = world.events_of(EventReason::RestoreAdmitting).len();

    // The status reverts to before the restore, right after the re-promotion.
    world.memory = reverted;
    world.run_polls(4);
    assert_eq!(
        world.events_of(EventReason::RestoreAdmitting).len(),
        admitted,
        "the request was not taken up again"
    );
    for _ in 0..3 {
        assert!(
            world.write("iad"),
            "iad takes writes after its re-promotion"
        );
    }
    let written = world.site("iad").gtid.clone();
    world.run_polls(10);
    assert_eq!(
        world.events_of(EventReason::RestoreAdmitting).len(),
        admitted
    );
    assert!(
        world.site("iad").gtid.contains(&written),
        "the writes since the re-promotion are kept"
    );
    assert!(world.write("iad"));
}

/// Simulator seed 880 with every fault mode on: a restore's load finished, then the status
/// reverted to before the restore (memory forgot it ran) and the pod restarted, so iad took
/// writes again. The request, still annotated, ran again under the same restore id: the
/// sidecar's finished job of the forgotten attempt was taken for the new one's, iad's set
/// (the backup plus the new writes) was not the backup's, and the restore failed leaving iad
/// fenced for good. A restore id the site's sidecar already reports is spent: the new attempt
/// takes the next one, its load runs, and iad is writable again.
#[test]
fn sim_seed_880_a_forgotten_restore_job_is_not_taken_for_a_new_attempt() {
    let (mut world, reverted) = restore_requested();
    for _ in 0..40 {
        world.run_polls(1);
        if world.site("iad").job.as_ref().is_some_and(|job| {
            job.kind == bloodraven_api::sidecar::JobKind::Restore
                && job.state == bloodraven_api::sidecar::JobState::Succeeded
        }) {
            break;
        }
    }
    assert_eq!(
        phase(&world),
        Some(RestorePhase::Restoring),
        "the load is done, not yet re-promoted"
    );
    let forgotten_id = world.site("iad").job.as_ref().map(|job| job.restore_id);

    world.memory = reverted;
    world.restart("iad");
    let mut wrote = false;
    for _ in 0..20 {
        world.run_polls(1);
        if world.write("iad") {
            wrote = true;
            break;
        }
    }
    assert!(
        wrote,
        "iad takes writes again before the request runs again"
    );
    let phases = run_to_final(&mut world);
    assert_eq!(
        phases.last(),
        Some(&RestorePhase::Completed),
        "{phases:?}: {:?}",
        world.memory.restore
    );
    let status = world.memory.restore.clone().expect("restore").status;
    assert_ne!(status.topology_generation, forgotten_id, "a new restore id");
    world.run_polls(3);
    assert_eq!(world.writable_sites(), vec!["iad".to_string()]);
    assert!(world.write("iad"));
}

/// [`backed_up`], then two transactions replicated everywhere (what the restore discards),
/// and a restore of iad whose re-seed of pdx hangs: returned in `Reseeding`, the reader
/// re-seeded, pdx still awaiting its re-seed.
fn reseeding_with_pdx_pending() -> World {
    let mut world = backed_up();
    assert!(world.write("iad"));
    assert!(world.write("iad"));
    world.run_polls(1);
    world.site_mut("pdx").job_hangs = true;
    restore_until_reseeding(&mut world);
    assert_eq!(phase(&world), Some(RestorePhase::Reseeding));
    world.run_polls(2);
    let status = world.memory.restore.clone().expect("restore").status;
    assert_eq!(status.pending_reseed, vec!["pdx".to_string()]);
    assert_eq!(status.reseeded, vec!["reader".to_string()]);
    world
}

/// Simulator seed 8103 with every fault mode on (the half about failover): a site awaiting
/// its re-seed holds what the restore discarded, under GTIDs the restored site reuses, so
/// "no errant transactions" proves nothing of it. It is no emergency candidate: promoted, it
/// would bring the discarded writes back. The restore is not failed by the emergency
/// either: it goes on, and completes once the site's re-seed is done.
#[test]
fn sim_seed_8103_a_site_awaiting_its_reseed_is_no_emergency_candidate_and_the_restore_goes_on() {
    let mut world = reseeding_with_pdx_pending();
    let generation = world.memory.topology_generation;
    world.site_mut("iad").mysql_up = false;
    world.run_polls(15);
    assert_eq!(world.memory.active_site, "iad", "pdx is never promoted");
    assert_eq!(world.memory.topology_generation, generation);
    assert!(!world.decisions.iter().any(|(_, d)| d
        .actions
        .iter()
        .any(|a| matches!(a, Action::Promote { .. }))));
    assert!(!world.events_of(EventReason::NoFailoverCandidate).is_empty());
    assert_eq!(phase(&world), Some(RestorePhase::Reseeding));
    // iad answers again; pdx's sidecar restarts, forgetting the hung job: it is re-seeded.
    world.site_mut("iad").mysql_up = true;
    let pdx = world.site_mut("pdx");
    pdx.job_hangs = false;
    pdx.job = None;
    run_to_final(&mut world);
    assert_eq!(phase(&world), Some(RestorePhase::Completed));
    assert_eq!(world.site("pdx").gtid, world.site("iad").gtid);
    assert!(world.events_of(EventReason::RestoreFailed).is_empty());
}

/// Simulator seeds 167 (`--all-faults --state-loss --status-revert --restore
/// --image-update`) and 62 (the same with `--rejoin`), found by `ErrantSiteUsed`: a restore of
/// iad left the reader awaiting its re-seed with a copy of what the restore discarded, and iad
/// took new writes under the reused numbers, fewer than the reader's copy. When iad died, the
/// emergency failover caught pdx up from the reader ("pdx lacks N transactions the reader
/// received from iad") and promoted it holding the discarded writes, which iad's history
/// lacks. A site awaiting its re-seed is no evidence of what the old primary committed, so it
/// is no catch-up source either: pdx is promoted as it is, the discarded writes stay
/// discarded.
#[test]
fn sim_seed_167_a_site_awaiting_its_reseed_is_no_catch_up_source() {
    let mut world = backed_up();
    for _ in 0..4 {
        assert!(world.write("iad"));
    }
    world.run_polls(1);
    world.site_mut("reader").job_hangs = true;
    restore_until_reseeding(&mut world);
    world.run_polls(2);
    let status = world.memory.restore.clone().expect("restore").status;
    assert_eq!(status.pending_reseed, vec!["reader".to_string()]);
    let reader_copy = world.site("reader").gtid.clone();
    // iad writes two transactions under the numbers the restore discarded; pdx follows it.
    for _ in 0..2 {
        assert!(world.write_numbered_after_own("iad", 1));
    }
    world.run_polls(2);
    let iad_history = world.site("iad").gtid.clone();
    assert_eq!(world.site("pdx").gtid, iad_history, "pdx follows iad");
    assert!(
        !lost_of(&reader_copy, &iad_history).is_empty(),
        "the reader holds discarded transactions iad's history lacks"
    );
    world.kill("iad");
    world.run_polls_until_active("pdx", 30);
    let caught_up_from_reader = world.decisions.iter().any(|(_, decision)| {
        decision.actions.iter().any(|action| {
            matches!(action, Action::Repoint { site, request }
                if site == "pdx" && request.source_host.contains("-reader"))
        })
    });
    assert!(
        !caught_up_from_reader,
        "pdx is never caught up from the reader awaiting its re-seed"
    );
    assert!(world.events_of(EventReason::CatchingUp).is_empty());
    assert!(
        lost_of(&world.site("pdx").gtid, &iad_history).is_empty(),
        "pdx was promoted holding nothing iad's history lacks: {} against {iad_history}",
        world.site("pdx").gtid
    );
}

/// What `set` holds that `other` lacks.
fn lost_of(set: &GtidSet, other: &GtidSet) -> GtidSet {
    bloodraven_mysql::lost_transactions(set, other)
}

/// Simulator seed 8103 (continued): an emergency failover after the re-promotion moves the
/// authority to a site already re-seeded; the restore is not failed by it, records the
/// re-seeds done, and re-seeds the rest from the new active site once it is writable.
#[test]
fn sim_seed_8103_after_an_emergency_failover_the_restore_reseeds_the_rest_from_the_new_active_site()
{
    let mut world = backed_up();
    assert!(world.write("iad"));
    assert!(world.write("iad"));
    world.run_polls(1);
    // The reader dies holding the discarded transactions.
    world.kill("reader");
    restore_until_reseeding(&mut world);
    world.run_polls(2);
    let status = world.memory.restore.clone().expect("restore").status;
    assert_eq!(status.pending_reseed, vec!["reader".to_string()]);
    world.site_mut("iad").mysql_up = false;
    world.run_polls_until_active("pdx", 20);
    assert_eq!(
        phase(&world),
        Some(RestorePhase::Reseeding),
        "the emergency failover does not fail the restore"
    );
    assert!(world.events_of(EventReason::RestoreFailed).is_empty());
    let from = world.decisions.len();
    world.restart("reader");
    run_to_final(&mut world);
    assert_eq!(phase(&world), Some(RestorePhase::Completed));
    let sources: Vec<String> = world.decisions[from..]
        .iter()
        .flat_map(|(_, d)| d.actions.iter())
        .filter_map(|a| match a {
            Action::Reseed { site, request } if site == "reader" => {
                Some(request.source_host.clone())
            }
            _ => None,
        })
        .collect();
    assert!(
        !sources.is_empty() && sources.iter().all(|host| host.contains("pdx")),
        "the reader is re-seeded from pdx, the active site: {sources:?}"
    );
    assert_eq!(world.site("reader").gtid, world.site("pdx").gtid);
}

/// Simulator seed 3085 with every fault mode on: a restore of iad re-promoted it while the
/// reader, dead, still held what the restore discarded; then every pod restarted (no sidecar
/// vouched for any authority) and the status reverted to a copy from before the restore. The
/// reverted memory adopted the restore's generation from the `last-failover` note, but with
/// no record of the restore the reader's copy of the discarded transactions read as
/// transactions iad lacks: no authority was issued again, for good ("diverged histories need
/// a human's choice"). The note now carries the backup and what the restore discarded; the
/// reverted memory rebuilds the record, iad is named again, and the reader is re-seeded.
#[test]
fn sim_seed_3085_a_reverted_status_rebuilds_the_restore_from_its_note() {
    let (mut world, reverted) = restore_requested();
    world.kill("reader");
    poll_until_reseeding(&mut world);
    assert_eq!(phase(&world), Some(RestorePhase::Reseeding));
    let record = world.memory.restore.clone().expect("restore").status;
    assert_eq!(record.pending_reseed, vec!["reader".to_string()]);
    let discarded = record.lost_gtid_set.clone().expect("discarded");
    let generation = world.memory.topology_generation;
    let note = noted(&world);
    assert!(
        note.to_string()
            .ends_with(&format!(" backup b1 discarded {discarded}")),
        "{note}"
    );
    assert!(!world.site("iad").gtid.contains(&world.site("reader").gtid));

    // Every pod restarts and forgets its authority; the status reverts to before the restore.
    restart_all_and_revert(&mut world, reverted);
    world.run_polls(10);
    assert_eq!(
        (
            world.memory.active_site.as_str(),
            world.memory.topology_generation
        ),
        ("iad", generation)
    );
    assert!(
        world.writable_sites() == vec!["iad".to_string()],
        "iad is writable again: {:?}",
        world.events_of(EventReason::AuthorityWithheld).last()
    );
    let rebuilt = world.memory.restore.clone().expect("rebuilt").status;
    assert_eq!(rebuilt.topology_generation, Some(generation));
    assert_eq!(rebuilt.lost_gtid_set.as_deref(), Some(discarded.as_str()));
    assert_eq!(
        rebuilt.reseeded.first().map(String::as_str),
        Some("pdx"),
        "pdx's sidecar shows the restore's re-seed done: {rebuilt:?}"
    );
    run_to_final(&mut world);
    let rebuilt = world.memory.restore.clone().expect("rebuilt").status;
    assert_eq!(rebuilt.phase, RestorePhase::Completed, "{rebuilt:?}");
    assert!(rebuilt.reseeded.contains(&"reader".to_string()));
    assert_eq!(world.site("reader").gtid, world.site("iad").gtid);
    assert!(world.split_brain_at.is_empty());
}

/// Simulator seed 1663 with every fault mode on: after an emergency failover iad -> pdx, iad
/// rejoined as pdx's replica and copied pdx's writes; a reverted status then named iad
/// demoted again (the failover's old site, from the note), and iad died. A restore of pdx
/// discarded those writes, and pdx wrote new ones under the same GTIDs. When iad answered
/// again, its copy of the discarded writes read as no errant transaction at all: iad rejoined
/// holding them, and the next failover promoted it (266 reported lost, 314 lost). A demoted
/// site has not replicated since its demotion, so what it holds of a restore's discards since
/// the last failover is errant, whatever the restored site wrote under those GTIDs since.
#[test]
fn sim_seed_1663_a_demoted_sites_copy_of_what_a_restore_discarded_is_errant_though_the_gtids_were_reused(
) {
    let mut world = World::bootstrapped();
    assert!(world.write("iad"));
    world.run_polls(1);
    world.kill("iad");
    world.run_polls_until_active("pdx", 40);
    world.run_polls(2);
    // What the reverted status will say: iad demoted by the failover.
    let reverted = world.memory.clone();
    world.restart("iad");
    world.run_polls(4);
    assert_eq!(
        world.memory.site("iad").map(|s| s.state),
        Some(bloodraven_core::engine::SiteState::Replica),
        "iad rejoined"
    );
    take_backup(&mut world, "b1");
    for _ in 0..3 {
        assert!(world.write("pdx"));
    }
    world.run_polls(2);
    let discarded = world.site("pdx").gtid.subtract(
        &world
            .memory
            .last_backup
            .clone()
            .unwrap()
            .gtid_set
            .unwrap()
            .parse()
            .unwrap(),
    );
    assert_eq!(discarded.count(), 3);
    assert!(
        world.site("iad").gtid.contains(&discarded),
        "iad copied them"
    );
    world.kill("iad");
    world.memory = reverted;
    world.annotations.restore = Some("b1".to_string());
    let phases = run_to_final(&mut world);
    assert_eq!(phases.last(), Some(&RestorePhase::Completed), "{phases:?}");
    // pdx writes new transactions under the discarded GTIDs.
    for _ in 0..3 {
        assert!(world.write_numbered_after_own("pdx", world.site("pdx").server_id));
    }
    assert!(world.site("pdx").gtid.contains(&world.site("iad").gtid));
    let rejoined = world.events_of(EventReason::ReturningPrimaryRejoined).len();
    world.restart("iad");
    world.run_polls(4);
    let iad = world.memory.site("iad").cloned().expect("iad");
    assert_eq!(
        iad.state,
        bloodraven_core::engine::SiteState::Demoted,
        "iad stays fenced"
    );
    assert_eq!(iad.errant, Some(discarded));
    assert_eq!(
        world.events_of(EventReason::ReturningPrimaryRejoined).len(),
        rejoined
    );
}

/// Simulator seed 4593 with every fault mode on: a restore fenced iad and the operator
/// crashed before the status recorded it; the reverted status took the still-annotated
/// request up again and waited for a valid authority, which iad's fence (lifted only at a
/// greater generation) never allowed: no site was writable again. A fence at memory's
/// generation that no operation in memory accounts for, with nothing loaded under it, is
/// released by re-asserting the site at a new generation; the restore then runs.
#[test]
fn sim_seed_4593_a_fence_the_status_forgot_is_released_and_the_restore_runs() {
    let (mut world, reverted) = restore_requested();
    let generation = world.memory.topology_generation;
    for _ in 0..5 {
        world.run_polls(1);
        if phase(&world) == Some(RestorePhase::Fencing) {
            break;
        }
    }
    assert_eq!(phase(&world), Some(RestorePhase::Fencing));
    assert_eq!(world.site("iad").fence_generation, Some(generation));
    // The status write of that decision is lost: memory is from before the request, which is
    // still annotated, and from a poll that saw iad not writable (as seed 4593's was).
    world.memory = reverted;
    world.memory.authority = bloodraven_core::engine::AuthorityValidity::Invalid(
        bloodraven_core::engine::InvalidReason::ActiveNotWritable,
    );
    let first_event = world.events.len();
    let phases = run_to_final(&mut world);
    assert_eq!(phases.last(), Some(&RestorePhase::Completed), "{phases:?}");
    assert!(
        world.events[first_event..].iter().any(|(_, event)| {
            event.reason == EventReason::PrimaryReasserted
                && event
                    .message
                    .contains("that no operation in memory accounts for")
        }),
        "{:#?}",
        &world.events[first_event..]
    );
    assert!(world.memory.topology_generation >= generation + 2);
    assert_eq!(world.writable_sites(), vec!["iad".to_string()]);
}

/// Seed 4593's fence, but a load had started under it when the status lost the restore: the
/// site's data may be partly restored, so it is not re-asserted. It stays fenced, recorded as
/// a failed load, and a restore requested again runs on it as a retry.
#[test]
fn sim_seed_4593_a_forgotten_fence_with_a_load_under_it_keeps_the_site_fenced_until_a_retry() {
    let (mut world, reverted) = restore_requested();
    world.site_mut("iad").job_hangs = true;
    for _ in 0..8 {
        world.run_polls(1);
        if phase(&world) == Some(RestorePhase::Restoring) {
            break;
        }
    }
    assert_eq!(phase(&world), Some(RestorePhase::Restoring));
    world.run_polls(1);
    assert!(world.site("iad").job.is_some(), "the load started");
    world.memory = reverted;
    world.memory.authority = bloodraven_core::engine::AuthorityValidity::Invalid(
        bloodraven_core::engine::InvalidReason::ActiveNotWritable,
    );
    let generation = world.memory.topology_generation;
    // The request was withdrawn meanwhile (the annotation removed).
    world.annotations.restore = None;
    world.run_polls(3);
    assert_eq!(
        world.memory.topology_generation, generation,
        "not re-asserted"
    );
    assert!(world.writable_sites().is_empty());
    assert!(world
        .events_of(EventReason::RestoreFailed)
        .iter()
        .any(|event| event.message.contains("its data may be partly restored")));
    assert_eq!(phase(&world), Some(RestorePhase::Failed));
    // Requested again, the retry loads the backup (a new job id) and re-promotes iad.
    world.site_mut("iad").job_hangs = false;
    world.annotations.restore = Some("b1".to_string());
    let phases = run_to_final(&mut world);
    assert_eq!(
        phases.last(),
        Some(&RestorePhase::Completed),
        "{phases:?} {:?} {:?}",
        world.memory.restore,
        world.annotations.restore
    );
    assert_eq!(world.writable_sites(), vec!["iad".to_string()]);
}

/// Simulator seed 6334 with every fault mode and `--rejoin`: a restore of iad from b1 loaded,
/// the human asked for b2 instead while it ran, and the operator restarted with a status
/// reverted to before the restore. The restarted operator found iad fenced under a load
/// nothing in memory accounted for (kept fenced: its data may be partly restored) and took
/// the standing b2 request up as a retry on the fenced site; but iad's mysqld was down (then
/// cut off) for longer than the fence confirmation's 30 s, and the retry failed as a restore
/// of a site in service does: "re-asserted" at a new generation, yet still fenced, waiting
/// for a human to ask a third time. iad, the active site, stayed fenced for good. A retry on
/// a site already held fenced gives nothing back by failing early: it waits for mysqld to
/// answer read-only under the fence (within the load's bound), loads b2, and re-promotes iad.
#[test]
fn sim_seed_6334_a_retry_on_a_site_held_fenced_waits_for_mysqld_instead_of_failing() {
    let mut world = backed_up();
    assert!(world.write("iad"));
    world.run_polls(1);
    take_backup(&mut world, "b2");
    assert!(world.write("iad"));
    world.run_polls(1);
    let reverted = world.memory.clone();
    world.annotations.restore = Some("b1".to_string());
    for _ in 0..20 {
        world.run_polls(1);
        if world.site("iad").job.as_ref().is_some_and(|job| {
            job.kind == bloodraven_api::sidecar::JobKind::Restore
                && job.state == bloodraven_api::sidecar::JobState::Succeeded
        }) {
            break;
        }
    }
    assert_eq!(
        phase(&world),
        Some(RestorePhase::Restoring),
        "b1 is loaded, iad not yet re-promoted"
    );
    // The human asks for b2 instead (taken up once this restore is over), then the operator
    // restarts with the status from before the restore while iad's mysqld is down.
    world.annotations.restore = Some("b2".to_string());
    world.memory = reverted;
    world.memory.authority = bloodraven_core::engine::AuthorityValidity::Invalid(
        bloodraven_core::engine::InvalidReason::ActiveNotWritable,
    );
    world.site_mut("iad").mysql_up = false;
    let generation = world.memory.topology_generation;
    world.run_polls(2);
    assert!(world
        .events_of(EventReason::RestoreFailed)
        .iter()
        .any(|event| event.message.contains("its data may be partly restored")));
    assert_eq!(
        phase(&world),
        Some(RestorePhase::Fencing),
        "b2 is the retry"
    );
    // mysqld stays down well past the fence confirmation's bound: the retry waits, iad fenced.
    world.run_polls(30);
    assert_eq!(phase(&world), Some(RestorePhase::Fencing));
    assert_eq!(
        world.memory.topology_generation, generation,
        "a site held fenced is not re-asserted"
    );
    assert!(world.writable_sites().is_empty());
    assert!(world.site("iad").fence_generation.is_some());
    // mysqld answers again, read-only: b2 loads and iad is re-promoted, with no human.
    world.site_mut("iad").mysql_up = true;
    world.site_mut("iad").read_only = true;
    let phases = run_to_final(&mut world);
    assert_eq!(
        phases.last(),
        Some(&RestorePhase::Completed),
        "{phases:?} {:?}",
        world.memory.restore
    );
    let status = world.memory.restore.clone().expect("restore").status;
    assert_eq!(status.backup, "b2");
    world.run_polls(3);
    assert_eq!(world.writable_sites(), vec!["iad".to_string()]);
    assert!(world.write("iad"));
}

/// Seed 6334's rule in admission: a retry on a site a failed load left fenced waits for its
/// sidecar past the admission's 120 s (the site is out of service either way), and runs once
/// it answers again.
#[test]
fn sim_seed_6334_a_retry_on_a_site_held_fenced_waits_for_its_sidecar_in_admission() {
    let mut world = backed_up();
    world.site_mut("iad").job_fails = Some("load dump.sql: ERROR 1064".to_string());
    world.annotations.restore = Some("b1".to_string());
    assert_eq!(run_to_final(&mut world).last(), Some(&RestorePhase::Failed));
    world.site_mut("iad").job_fails = None;
    world.run_polls(1);
    // iad's pod dies, and the restore is requested again meanwhile.
    world.kill("iad");
    world.annotations.restore = Some("b1".to_string());
    let interval = world.spec.poll_interval.get();
    let mut waited = Duration::ZERO;
    while waited <= bloodraven_core::engine::RESTORE_ADMISSION_TIMEOUT + interval + interval {
        world.run_polls(1);
        waited += interval;
    }
    assert_eq!(phase(&world), Some(RestorePhase::Admitting));
    assert!(world.writable_sites().is_empty());
    world.restart("iad");
    let phases = run_to_final(&mut world);
    assert_eq!(
        phases.last(),
        Some(&RestorePhase::Completed),
        "{phases:?} {:?}",
        world.memory.restore
    );
    world.run_polls(3);
    assert_eq!(world.writable_sites(), vec!["iad".to_string()]);
}
