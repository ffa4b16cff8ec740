//! Core scenarios: the rejoin of a fenced returning primary
//! (docs/design/operator.md#returning-primary, "An addition to the requirements"; issue 35 in
//! docs/design/history.md): `kubectl bloodraven rejoin` (the annotation) or
//! `spec.returningPrimary.onErrant: rejoin` archives the errant transactions, re-seeds the site
//! from the active one, and only then labels it `replica`; refused, deferred behind a
//! failover-hold (docs/design/requirements.md R003.17), stopped on a failed archive, and
//! resumed from status after an operator restart.

use crate::support::{labels_of, World};
use bloodraven_api::{
    sidecar::{JobKind, JobState},
    DeferReason, OnErrant, RejoinPhase, RejoinStatus,
};
use bloodraven_core::deploy::{DisruptionKind, HoldInfo};
use bloodraven_core::engine::{
    deferrable_disruption_in_flight, gated_start, Action, EventReason, GroupMemory, PodRole,
    SiteState,
};
use bloodraven_core::time::Duration;
use bloodraven_mysql::{errant_transactions, GtidSet};

/// A bootstrapped world in which iad committed 3 transactions pdx and the reader never
/// received, died, pdx was promoted, pdx took 2 writes, and iad came back: demoted, read-only,
/// `role=fenced`, holding those 3 errant transactions.
fn fenced_returning_primary() -> World {
    let mut world = World::bootstrapped();
    world.site_mut("pdx").peer_cut = true;
    world.site_mut("reader").peer_cut = true;
    for _ in 0..3 {
        assert!(world.write("iad"));
    }
    world.kill("iad");
    world.site_mut("pdx").peer_cut = false;
    world.site_mut("reader").peer_cut = false;
    world.run_polls(10);
    assert_eq!(world.memory.active_site, "pdx");
    world.run_polls(2);
    assert!(world.write("pdx"));
    assert!(world.write("pdx"));
    world.restart("iad");
    world.run_polls(2);
    let iad = world.memory.site("iad").expect("iad");
    assert_eq!(iad.state, SiteState::Demoted);
    assert_eq!(iad.errant.as_ref().map(GtidSet::count), Some(3));
    assert!(world.memory.authority.is_valid());
    world
}

/// [`fenced_returning_primary`] with a fourth site, `sea`, read-write like pdx, so that a
/// failover can happen while iad is fenced; returns the world and the active site.
fn four_sites_with_a_fenced_returning_primary() -> (World, String) {
    let mut spec = crate::support::playground_spec();
    let mut sea = spec.sites[1].clone();
    sea.name = "sea".to_string();
    spec.sites.insert(2, sea);
    let mut world = World::with_spec(spec);
    world.poll();
    world.run_polls(3);
    assert!(world.memory.authority.is_valid());
    for site in ["pdx", "sea", "reader"] {
        world.site_mut(site).peer_cut = true;
    }
    for _ in 0..3 {
        assert!(world.write("iad"));
    }
    world.kill("iad");
    for site in ["pdx", "sea", "reader"] {
        world.site_mut(site).peer_cut = false;
    }
    world.run_polls(12);
    let active = world.memory.active_site.clone();
    assert_ne!(active, "iad");
    world.restart("iad");
    // Past the cooldown: a failover of the active site may start.
    world.run_polls(16);
    assert_eq!(errant_now(&world).count(), 3);
    assert_eq!(
        world.memory.site("iad").expect("iad").state,
        SiteState::Demoted
    );
    (world, active)
}

fn rejoin(world: &World, site: &str) -> Option<RejoinStatus> {
    world
        .memory
        .site(site)
        .and_then(|entry| entry.rejoin.as_ref())
        .map(|rejoin| rejoin.status.clone())
}

fn phase(world: &World) -> Option<RejoinPhase> {
    rejoin(world, "iad").map(|status| status.phase)
}

/// What iad holds that the active site lacks, in the fake world now.
fn errant_now(world: &World) -> GtidSet {
    let active = world.memory.active_site.clone();
    errant_transactions(&world.site("iad").gtid, &world.site(&active).gtid)
}

/// docs/design/operator.md#returning-primary: while iad holds a transaction the active site
/// lacks it is demoted (never a candidate) and its pod `role=fenced` (in no shared Service).
fn assert_fenced_while_errant(world: &World) {
    if errant_now(world).is_empty() {
        return;
    }
    let iad = world.memory.site("iad").expect("iad");
    assert_eq!(
        iad.state,
        SiteState::Demoted,
        "iad holds {} errant transactions and is {:?} ({:?})",
        errant_now(world),
        iad.state,
        phase(world)
    );
    let (_, decision) = world.decisions.last().expect("a decision");
    assert_eq!(
        labels_of(decision, "iad"),
        Some((PodRole::Fenced, false)),
        "iad labelled to serve while it holds {}",
        errant_now(world)
    );
}

/// One poll, then the fenced-while-errant check.
fn poll_checked(world: &mut World) {
    world.run_polls(1);
    assert_fenced_while_errant(world);
}

/// Polls (at most 40) until iad's rejoin is over; the phases seen, in order.
fn run_to_final(world: &mut World) -> Vec<RejoinPhase> {
    let mut phases = Vec::new();
    for _ in 0..40 {
        poll_checked(world);
        if let Some(current) = phase(world) {
            if phases.last() != Some(&current) {
                phases.push(current);
            }
            if current.is_final() {
                break;
            }
        }
    }
    phases
}

fn actions_of(world: &World, matches: impl Fn(&Action) -> bool) -> Vec<Action> {
    world
        .decisions
        .iter()
        .flat_map(|(_, decision)| decision.actions.iter())
        .filter(|action| matches(action))
        .cloned()
        .collect()
}

fn is_archive(action: &Action) -> bool {
    matches!(action, Action::Archive { .. })
}

fn is_reseed(action: &Action) -> bool {
    matches!(action, Action::Reseed { .. })
}

/// The operator restarts: memory is what the status it wrote reads back as.
fn restart_operator(world: &mut World) {
    let status = world.memory.to_status();
    world.memory = GroupMemory::from_status(&world.spec, Some(&status), world.now);
}

/// The re-seed job on `site` that hangs finishes as the sidecar finishes it: the site holds
/// the source's set and replicates from it.
fn finish_hanging_reseed(world: &mut World, site: &str, source: &str) {
    let gtid = world.site(source).gtid.clone();
    let target = world.site_mut(site);
    target.job_hangs = false;
    target.gtid = gtid;
    target.source = Some(source.to_string());
    target.running = true;
    let job = target.job.as_mut().expect("a job");
    assert_eq!(job.kind, JobKind::Reseed);
    job.state = JobState::Succeeded;
}

#[test]
fn issue_35_rejoin_on_request_archives_the_errant_transactions_then_reseeds_and_rejoins() {
    let mut world = fenced_returning_primary();
    let errant = errant_now(&world);
    assert_eq!(errant.count(), 3);
    world.annotations.rejoin = Some("iad".to_string());
    let phases = run_to_final(&mut world);
    assert_eq!(
        phases,
        vec![
            RejoinPhase::Archiving,
            RejoinPhase::Reseeding,
            RejoinPhase::Completed
        ]
    );
    let status = rejoin(&world, "iad").expect("rejoin");
    let id = status.rejoin_id.expect("a rejoin id");
    let archive = format!("rejoin-iad-{id}");
    assert_eq!(status.archive.as_deref(), Some(archive.as_str()));
    assert_eq!(status.errant_gtid_set, Some(errant.to_string()));
    assert_eq!(status.active_site.as_deref(), Some("pdx"));
    assert!(!status.automatic);
    let times = [
        status.requested_at,
        status.archived_at,
        status.reseeded_at,
        status.completed_at,
    ];
    assert!(times.iter().all(Option::is_some), "{times:?}");
    assert!(times.windows(2).all(|pair| pair[0] <= pair[1]), "{times:?}");
    // The archive holds exactly the errant set, and it was taken before any re-seed.
    assert_eq!(
        world.site("iad").archives,
        vec![(archive.clone(), errant.clone())]
    );
    let first_archive = world
        .decisions
        .iter()
        .position(|(_, d)| d.actions.iter().any(is_archive))
        .expect("an archive");
    let first_reseed = world
        .decisions
        .iter()
        .position(|(_, d)| d.actions.iter().any(is_reseed))
        .expect("a re-seed");
    assert!(first_archive < first_reseed);
    // The archive is asked for only under the explicit fence.
    assert!(actions_of(
        &world,
        |a| matches!(a, Action::Fence { site, .. } if site == "iad")
    )
    .iter()
    .all(|fence| matches!(fence, Action::Fence { request, .. } if !request.kill_connections)));
    // iad is a replica of pdx again: untainted, replicating, healthy, in -replicas.
    world.run_polls(2);
    let iad = world.memory.site("iad").expect("iad");
    assert_eq!(iad.state, SiteState::Replica);
    assert_eq!(world.site("iad").source.as_deref(), Some("pdx"));
    assert!(errant_now(&world).is_empty());
    assert!(!world.taints.contains("node-iad"));
    let (_, last) = world.decisions.last().expect("decision");
    assert_eq!(labels_of(last, "iad"), Some((PodRole::Replica, true)));
    assert_eq!(world.annotations.rejoin, None, "the annotation is removed");
    // The Events name the archive and the set.
    for reason in [
        EventReason::RejoinArchiving,
        EventReason::RejoinArchived,
        EventReason::RejoinCompleted,
    ] {
        let events = world.events_of(reason);
        assert_eq!(events.len(), 1, "{reason:?}");
        assert!(
            events[0].message.contains(&archive) && events[0].message.contains(&errant.to_string()),
            "{reason:?}: {}",
            events[0].message
        );
    }
    assert!(world.split_brain_at.is_empty());
    // And an emergency candidate again: pdx dies after the cooldown, iad is promoted.
    world.run_polls(16);
    world.kill("pdx");
    world.run_polls_until_active("iad", 20);
    assert!(world.split_brain_at.is_empty());
}

#[test]
fn issue_35_a_rejoin_is_refused_for_the_active_site_a_serving_site_or_an_unknown_one() {
    let mut world = fenced_returning_primary();
    for (site, says) in [
        ("pdx", "pdx is the active site"),
        ("reader", "reader is not fenced"),
    ] {
        world.annotations.rejoin = Some(site.to_string());
        world.run_polls(1);
        let status = rejoin(&world, site).expect("a record");
        assert_eq!(status.phase, RejoinPhase::Refused, "{site}");
        let message = status.message.unwrap_or_default();
        assert!(message.contains(says), "{site}: {message}");
        assert!(world
            .events_of(EventReason::RejoinRefused)
            .iter()
            .any(|event| event.message.contains(says)));
        assert_eq!(world.annotations.rejoin, None, "{site}: removed");
        world.run_polls(1);
    }
    world.annotations.rejoin = Some("sfo".to_string());
    world.run_polls(1);
    assert!(world
        .events_of(EventReason::RejoinRefused)
        .iter()
        .any(|event| event.message.contains("sfo is not a site of this group")));
    assert_eq!(world.annotations.rejoin, None);
    // Nothing was fenced, archived or re-seeded; iad is still fenced.
    assert!(actions_of(&world, |a| is_archive(a) || is_reseed(a)).is_empty());
    assert_eq!(phase(&world), None);
    assert_fenced_while_errant(&world);
}

#[test]
fn issue_35_a_rejoin_of_a_returning_primary_without_errant_transactions_is_refused() {
    // iad dies without losing a write, pdx is promoted; iad returns with the request already
    // there: refused (nothing to archive), and the plain rule rejoins it.
    let mut world = World::bootstrapped();
    world.kill("iad");
    world.run_polls(10);
    assert_eq!(world.memory.active_site, "pdx");
    world.restart("iad");
    world.annotations.rejoin = Some("iad".to_string());
    world.run_polls(1);
    let status = rejoin(&world, "iad").expect("a record");
    assert_eq!(status.phase, RejoinPhase::Refused);
    let message = status.message.unwrap_or_default();
    assert!(message.contains("has no errant transactions"), "{message}");
    world.run_polls(2);
    assert_eq!(
        world.memory.site("iad").expect("iad").state,
        SiteState::Replica
    );
    assert!(actions_of(&world, is_archive).is_empty());
}

#[test]
fn issue_35_a_rejoin_is_refused_without_a_valid_authority() {
    let mut world = fenced_returning_primary();
    world.site_mut("pdx").mysql_up = false;
    world.annotations.rejoin = Some("iad".to_string());
    world.run_polls(1);
    assert!(!world.memory.authority.is_valid());
    let status = rejoin(&world, "iad").expect("a record");
    assert_eq!(status.phase, RejoinPhase::Refused);
    let message = status.message.unwrap_or_default();
    assert!(message.contains("no valid authority"), "{message}");
    assert!(actions_of(&world, |a| is_archive(a) || is_reseed(a)).is_empty());
    assert_fenced_while_errant(&world);
}

#[test]
fn issue_35_a_rejoin_is_refused_while_a_failover_is_in_flight() {
    let mut world = fenced_returning_primary();
    // A planned failover to iad waits in the cooldown (onCooldown: defer): in flight.
    world.spec.planned_failover.on_cooldown = bloodraven_api::OnCooldown::Defer;
    world.annotations.planned_failover = Some("iad".to_string());
    world.run_polls(1);
    assert!(world.memory.planned_failover.is_some());
    world.annotations.rejoin = Some("iad".to_string());
    world.run_polls(1);
    let status = rejoin(&world, "iad").expect("a record");
    assert_eq!(status.phase, RejoinPhase::Refused);
    let message = status.message.unwrap_or_default();
    assert!(
        message.contains("a planned failover to iad is in flight"),
        "{message}"
    );
    // An emergency failover of the active site (to a fourth site, sea or pdx).
    let (mut world, active) = four_sites_with_a_fenced_returning_primary();
    world.kill(&active);
    for _ in 0..10 {
        world.run_polls(1);
        if world.memory.emergency_failover.is_some() {
            break;
        }
    }
    assert!(world.memory.emergency_failover.is_some());
    world.annotations.rejoin = Some("iad".to_string());
    world.run_polls(1);
    let message = rejoin(&world, "iad")
        .and_then(|status| status.message)
        .unwrap_or_default();
    assert!(message.contains("a failover is in flight"), "{message}");
    assert!(actions_of(&world, |a| is_archive(a) || is_reseed(a)).is_empty());
}

#[test]
fn issue_35_a_rejoin_is_refused_while_a_restore_in_place_is_in_flight() {
    let mut world = fenced_returning_primary();
    world.annotations.backup = Some("b1".to_string());
    world.run_polls(3);
    world.annotations.restore = Some("b1".to_string());
    world.annotations.rejoin = Some("iad".to_string());
    world.run_polls(1);
    let status = rejoin(&world, "iad").expect("a record");
    assert_eq!(status.phase, RejoinPhase::Refused);
    let message = status.message.unwrap_or_default();
    assert!(
        message.contains("a restore in place of pdx is in flight"),
        "{message}"
    );
    assert!(actions_of(&world, |a| is_archive(a) || is_reseed(a)).is_empty());
}

#[test]
fn issue_35_a_rejoin_is_refused_while_an_ordered_update_is_in_flight() {
    let mut world = fenced_returning_primary();
    // After the cooldown (an update that needs a failover inside it is rejected).
    world.run_polls(16);
    world.spec.image = "mariadb:10.11.9".to_string();
    world.run_polls(1);
    assert!(world
        .memory
        .ordered_update
        .as_ref()
        .is_some_and(|update| update.in_flight()));
    world.annotations.rejoin = Some("iad".to_string());
    world.run_polls(1);
    let status = rejoin(&world, "iad").expect("a record");
    assert_eq!(status.phase, RejoinPhase::Refused);
    let message = status.message.unwrap_or_default();
    assert!(
        message.contains("an ordered update to mariadb:10.11.9 is in flight"),
        "{message}"
    );
}

#[test]
fn seed_003_a_live_failover_hold_defers_the_rejoin_until_it_lapses() {
    let mut world = fenced_returning_primary();
    let expiry = world.now + Duration::from_secs(20);
    world.hold = Some(HoldInfo {
        operation_id: "a1c3f0e2".to_string(),
        instance: "counter-app".to_string(),
        earliest_expiry: expiry,
    });
    world.annotations.rejoin = Some("iad".to_string());
    for _ in 0..4 {
        let before = world.memory.clone();
        let decision = world.poll();
        world.advance(world.spec.poll_interval.get());
        assert_eq!(gated_start(&before, &decision.memory), None);
        assert!(!decision.actions.iter().any(|action| {
            is_archive(action)
                || is_reseed(action)
                || matches!(action, Action::Fence { site, .. } if site == "iad")
        }));
    }
    let status = rejoin(&world, "iad").expect("a record");
    assert_eq!(status.phase, RejoinPhase::Deferred);
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
    assert_eq!(world.events_of(EventReason::RejoinDeferred).len(), 1);
    assert!(!deferrable_disruption_in_flight(&world.memory));
    // The hold lapses: requested again, and the decision that fences iad is the gated start.
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
    assert_eq!(start.kind, DisruptionKind::Rejoin);
    assert_eq!((start.from.as_str(), start.target.as_str()), ("pdx", "iad"));
    assert!(deferrable_disruption_in_flight(&world.memory));
    run_to_final(&mut world);
    assert_eq!(phase(&world), Some(RejoinPhase::Completed));
    assert!(!deferrable_disruption_in_flight(&world.memory));
}

#[test]
fn issue_35_on_errant_rejoin_starts_the_rejoin_once_the_site_is_readable_archive_first() {
    let mut world = World::playground();
    world.spec.returning_primary.on_errant = OnErrant::Rejoin;
    world.poll();
    world.run_polls(3);
    world.site_mut("pdx").peer_cut = true;
    world.site_mut("reader").peer_cut = true;
    for _ in 0..3 {
        assert!(world.write("iad"));
    }
    world.kill("iad");
    world.site_mut("pdx").peer_cut = false;
    world.site_mut("reader").peer_cut = false;
    world.run_polls(12);
    assert_eq!(world.memory.active_site, "pdx");
    // Not readable: nothing starts.
    assert_eq!(phase(&world), None);
    let errant = {
        world.restart("iad");
        errant_now(&world)
    };
    assert_eq!(errant.count(), 3);
    let phases = run_to_final(&mut world);
    assert_eq!(phases.first(), Some(&RejoinPhase::Archiving));
    assert_eq!(phases.last(), Some(&RejoinPhase::Completed));
    let status = rejoin(&world, "iad").expect("rejoin");
    assert!(status.automatic);
    assert_eq!(status.errant_gtid_set, Some(errant.to_string()));
    assert_eq!(world.site("iad").archives.len(), 1);
    assert_eq!(world.site("iad").archives[0].1, errant);
    assert_eq!(world.events_of(EventReason::RejoinRequested).len(), 1);
    assert!(world.events_of(EventReason::RejoinRequested)[0]
        .message
        .contains("onErrant: rejoin"));
    world.run_polls(2);
    assert_eq!(
        world.memory.site("iad").expect("iad").state,
        SiteState::Replica
    );
    // Done once: no second rejoin starts.
    world.run_polls(5);
    assert_eq!(world.events_of(EventReason::RejoinRequested).len(), 1);
    assert_eq!(world.site("iad").archives.len(), 1);
}

#[test]
fn issue_35_on_errant_fence_the_default_keeps_the_returning_primary_fenced() {
    let mut world = fenced_returning_primary();
    assert_eq!(world.spec.returning_primary.on_errant, OnErrant::Fence);
    for _ in 0..20 {
        poll_checked(&mut world);
    }
    assert_eq!(phase(&world), None);
    assert!(actions_of(&world, |a| is_archive(a) || is_reseed(a)).is_empty());
    assert_eq!(
        world.memory.site("iad").expect("iad").state,
        SiteState::Demoted
    );
}

#[test]
fn issue_35_a_failed_archive_stops_the_rejoin_and_the_site_stays_fenced() {
    let mut world = fenced_returning_primary();
    let before = world.site("iad").gtid.clone();
    world.site_mut("iad").archive_fails =
        Some("read binlog: the binlog holding 0-1-11 was purged".to_string());
    world.annotations.rejoin = Some("iad".to_string());
    let phases = run_to_final(&mut world);
    assert_eq!(phases, vec![RejoinPhase::Archiving, RejoinPhase::Failed]);
    let status = rejoin(&world, "iad").expect("rejoin");
    let message = status.message.clone().unwrap_or_default();
    assert!(
        message.contains("was purged") && message.contains("stays fenced"),
        "{message}"
    );
    assert_eq!(status.archived_at, None);
    let failed = world.events_of(EventReason::RejoinFailed);
    assert_eq!(failed.len(), 1);
    assert!(
        failed[0].message.contains("was purged"),
        "{}",
        failed[0].message
    );
    assert_eq!(world.annotations.rejoin, None);
    // Nothing re-seeded, iad untouched and fenced for many polls.
    for _ in 0..15 {
        poll_checked(&mut world);
    }
    assert!(actions_of(&world, is_reseed).is_empty());
    assert_eq!(world.site("iad").gtid, before);
    assert_eq!(
        world.memory.site("iad").expect("iad").state,
        SiteState::Demoted
    );
    assert!(world.taints.contains("node-iad"));
    assert!(world.site("iad").archives.is_empty());
    // Requested again, the archive works: a new archive (another name), then the rejoin.
    world.site_mut("iad").archive_fails = None;
    world.annotations.rejoin = Some("iad".to_string());
    run_to_final(&mut world);
    assert_eq!(phase(&world), Some(RejoinPhase::Completed));
    let second = rejoin(&world, "iad").expect("rejoin");
    assert!(second.rejoin_id > status.rejoin_id);
    assert_eq!(world.site("iad").archives.len(), 1);
}

#[test]
fn issue_35_a_failed_reseed_keeps_the_site_fenced_and_a_new_request_reuses_the_archive() {
    let mut world = fenced_returning_primary();
    world.site_mut("iad").job_fails = Some("load dump.sql: ERROR 1064".to_string());
    world.annotations.rejoin = Some("iad".to_string());
    let phases = run_to_final(&mut world);
    assert_eq!(
        phases,
        vec![
            RejoinPhase::Archiving,
            RejoinPhase::Reseeding,
            RejoinPhase::Failed
        ]
    );
    let status = rejoin(&world, "iad").expect("rejoin");
    let archive = status.archive.clone().expect("archive");
    let message = status.message.clone().unwrap_or_default();
    assert!(
        message.contains("ERROR 1064")
            && message.contains("stays fenced")
            && message.contains(&format!("archive {archive} is kept")),
        "{message}"
    );
    // A re-seed that failed may have loaded part of a dump: even with no errant set left the
    // site is not rejoined by the plain rule (the sidecar loaded the dump and reset the
    // binlog, then failed to point replication anywhere).
    let pdx = world.site("pdx").gtid.clone();
    world.site_mut("iad").gtid = pdx;
    for _ in 0..10 {
        world.run_polls(1);
        let (_, decision) = world.decisions.last().expect("decision");
        assert_eq!(labels_of(decision, "iad"), Some((PodRole::Fenced, false)));
        assert_eq!(
            world.memory.site("iad").expect("iad").state,
            SiteState::Demoted
        );
    }
    // Requested again: the kept archive holds everything, so no second archive.
    world.site_mut("iad").job_fails = None;
    world.annotations.rejoin = Some("iad".to_string());
    let phases = run_to_final(&mut world);
    assert_eq!(phases, vec![RejoinPhase::Reseeding, RejoinPhase::Completed]);
    let done = rejoin(&world, "iad").expect("rejoin");
    assert_eq!(done.archive.as_deref(), Some(archive.as_str()));
    assert_eq!(world.site("iad").archives.len(), 1);
    assert_eq!(actions_of(&world, is_archive).len(), 1);
}

#[test]
fn issue_35_a_reseed_that_loaded_its_dump_but_does_not_replicate_yet_stays_fenced() {
    let mut world = fenced_returning_primary();
    world.site_mut("iad").job_hangs = true;
    world.annotations.rejoin = Some("iad".to_string());
    for _ in 0..6 {
        poll_checked(&mut world);
    }
    assert_eq!(phase(&world), Some(RejoinPhase::Reseeding));
    // Mid-job: the dump is loaded and the binlog reset to its set, no replication yet.
    let pdx = world.site("pdx").gtid.clone();
    world.site_mut("iad").gtid = pdx;
    world.site_mut("iad").source = None;
    world.site_mut("iad").running = false;
    for _ in 0..5 {
        world.run_polls(1);
        let (_, decision) = world.decisions.last().expect("decision");
        assert_eq!(labels_of(decision, "iad"), Some((PodRole::Fenced, false)));
        assert_eq!(
            world.memory.site("iad").expect("iad").state,
            SiteState::Demoted
        );
    }
    // The job reports success without replication running: not rejoined yet, but repointed
    // at pdx (it holds nothing pdx lacks); rejoined once it replicates directly from pdx.
    world.site_mut("iad").job_hangs = false;
    world.site_mut("iad").job.as_mut().expect("job").state = JobState::Succeeded;
    poll_checked(&mut world);
    assert_eq!(
        phase(&world),
        Some(RejoinPhase::Reseeding),
        "not rejoined before it replicates from pdx"
    );
    let (_, decision) = world.decisions.last().expect("decision");
    assert_eq!(labels_of(decision, "iad"), Some((PodRole::Fenced, false)));
    assert!(decision
        .actions
        .iter()
        .any(|a| matches!(a, Action::Repoint { site, .. } if site == "iad")));
    assert_eq!(world.site("iad").source.as_deref(), Some("pdx"));
    poll_checked(&mut world);
    assert_eq!(phase(&world), Some(RejoinPhase::Completed));
}

#[test]
fn issue_35_an_operator_restart_in_each_phase_resumes_the_rejoin_from_status() {
    // Deferred: the restarted operator keeps it deferred, then runs it once the hold lapses.
    let mut world = fenced_returning_primary();
    world.hold = Some(HoldInfo {
        operation_id: "op".to_string(),
        instance: "counter-app".to_string(),
        earliest_expiry: world.now + Duration::from_secs(10),
    });
    world.annotations.rejoin = Some("iad".to_string());
    world.run_polls(2);
    assert_eq!(phase(&world), Some(RejoinPhase::Deferred));
    restart_operator(&mut world);
    assert_eq!(phase(&world), Some(RejoinPhase::Deferred));
    poll_checked(&mut world);
    assert_eq!(phase(&world), Some(RejoinPhase::Deferred));
    world.hold = None;
    run_to_final(&mut world);
    assert_eq!(phase(&world), Some(RejoinPhase::Completed));

    // Archiving, the archive job running: resumed, the same archive asked for.
    let mut world = fenced_returning_primary();
    world.site_mut("iad").archive_hangs = true;
    world.annotations.rejoin = Some("iad".to_string());
    for _ in 0..3 {
        poll_checked(&mut world);
    }
    assert_eq!(phase(&world), Some(RejoinPhase::Archiving));
    let archive = rejoin(&world, "iad").and_then(|s| s.archive).expect("name");
    restart_operator(&mut world);
    world.restart_sidecar("iad");
    for _ in 0..3 {
        poll_checked(&mut world);
    }
    assert_eq!(phase(&world), Some(RejoinPhase::Archiving));
    assert!(world.site("iad").fence_generation.is_some(), "fenced again");
    let errant = errant_now(&world);
    let job = world.site_mut("iad").job.as_mut().expect("archive job");
    job.state = JobState::Succeeded;
    world
        .site_mut("iad")
        .archives
        .push((archive.clone(), errant));
    run_to_final(&mut world);
    assert_eq!(phase(&world), Some(RejoinPhase::Completed));
    assert!(actions_of(&world, is_archive).iter().all(|action| {
        matches!(action, Action::Archive { request, .. } if request.name == archive)
    }));

    // Reseeding, the re-seed job running: resumed, the site fenced until it is done.
    let mut world = fenced_returning_primary();
    world.site_mut("iad").job_hangs = true;
    world.annotations.rejoin = Some("iad".to_string());
    for _ in 0..5 {
        poll_checked(&mut world);
    }
    assert_eq!(phase(&world), Some(RejoinPhase::Reseeding));
    restart_operator(&mut world);
    assert_eq!(
        world.memory.site("iad").expect("iad").state,
        SiteState::Demoted,
        "role=fenced reads back as demoted"
    );
    for _ in 0..3 {
        poll_checked(&mut world);
    }
    assert_eq!(phase(&world), Some(RejoinPhase::Reseeding));
    finish_hanging_reseed(&mut world, "iad", "pdx");
    run_to_final(&mut world);
    assert_eq!(phase(&world), Some(RejoinPhase::Completed));

    // The status that recorded Reseeding was lost (the operator restarted before writing
    // it): it resumes in Archiving, finds the re-seed under its id, and never asks for the
    // archive again (the re-seeded site would refuse it).
    let mut world = fenced_returning_primary();
    world.site_mut("iad").job_hangs = true;
    world.annotations.rejoin = Some("iad".to_string());
    let mut archiving_status = None;
    for _ in 0..6 {
        poll_checked(&mut world);
        if phase(&world) == Some(RejoinPhase::Archiving) {
            archiving_status = Some(world.memory.to_status());
        }
        if phase(&world) == Some(RejoinPhase::Reseeding) {
            break;
        }
    }
    let archives_asked = actions_of(&world, is_archive).len();
    let reverted = archiving_status.expect("an Archiving status");
    world.memory = GroupMemory::from_status(&world.spec, Some(&reverted), world.now);
    assert_eq!(phase(&world), Some(RejoinPhase::Archiving));
    poll_checked(&mut world);
    assert_eq!(phase(&world), Some(RejoinPhase::Reseeding));
    finish_hanging_reseed(&mut world, "iad", "pdx");
    run_to_final(&mut world);
    assert_eq!(phase(&world), Some(RejoinPhase::Completed));
    assert_eq!(actions_of(&world, is_archive).len(), archives_asked);

    // Completed: the restarted operator keeps iad a replica.
    restart_operator(&mut world);
    world.run_polls(3);
    assert_eq!(
        world.memory.site("iad").expect("iad").state,
        SiteState::Replica
    );
    assert_eq!(phase(&world), Some(RejoinPhase::Completed));
}

#[test]
fn issue_35_a_failover_during_the_rejoin_stops_it_and_the_site_stays_fenced() {
    let (mut world, active) = four_sites_with_a_fenced_returning_primary();
    world.site_mut("iad").archive_hangs = true;
    world.annotations.rejoin = Some("iad".to_string());
    for _ in 0..3 {
        poll_checked(&mut world);
    }
    assert_eq!(phase(&world), Some(RejoinPhase::Archiving));
    world.kill(&active);
    for _ in 0..12 {
        poll_checked(&mut world);
    }
    assert_eq!(phase(&world), Some(RejoinPhase::Failed));
    let message = rejoin(&world, "iad")
        .and_then(|status| status.message)
        .unwrap_or_default();
    assert!(message.contains("a failover"), "{message}");
    assert!(message.contains("stays fenced"), "{message}");
    assert_eq!(
        world.memory.site("iad").expect("iad").state,
        SiteState::Demoted
    );
    assert!(actions_of(&world, is_reseed).is_empty());
    // The failover promoted the third site, never iad.
    world.run_polls(6);
    assert_ne!(world.memory.active_site, "iad");
    assert_ne!(world.memory.active_site, active);
    assert_fenced_while_errant(&world);
}
