//! Core scenarios: planned failover phases, admission (cooldown reject/defer, deployment
//! hold), zero lost transactions (docs/design/operator.md#planned-failover;
//! docs/design/requirements.md R001.12, R003.16).

use crate::support::{labels_of, World};
use bloodraven_api::sidecar::PromoteDrain;
use bloodraven_api::{DeferReason, FailoverKind, OnCooldown, PlannedFailoverPhase};
use bloodraven_core::deploy::{HoldInfo, RevokeReason};
use bloodraven_core::engine::{
    decide, deferrable_disruption_in_flight, gated_start, Action, Decision, EventReason,
    MetricObservation, PodRole, SiteState,
};
use bloodraven_core::time::Duration;

fn phase(world: &World) -> Option<PlannedFailoverPhase> {
    world.memory.planned_failover.as_ref().map(|p| p.phase)
}

fn request(world: &mut World, target: &str) {
    world.annotations.planned_failover = Some(target.to_string());
}

/// Polls until the planned failover reaches a final phase (bounded: longer than the
/// Draining bound).
fn run_to_final(world: &mut World) {
    for _ in 0..45 {
        world.run_polls(1);
        if matches!(
            phase(world),
            Some(PlannedFailoverPhase::Completed | PlannedFailoverPhase::Rejected)
        ) {
            return;
        }
    }
}

#[test]
fn planned_failover_goes_admitting_draining_promoting_completed_with_zero_lost() {
    // docs/design/operator.md#planned-failover: Admitting -> Draining -> Promoting -> Completed
    // with zero lost transactions.
    let mut world = World::bootstrapped();
    request(&mut world, "pdx");
    let mut phases = Vec::new();
    for _ in 0..15 {
        // Write load on whichever site is writable.
        for site in ["iad", "pdx"] {
            world.write(site);
        }
        world.run_polls(1);
        let current = phase(&world).unwrap();
        if phases.last() != Some(&current) {
            phases.push(current);
        }
        if current == PlannedFailoverPhase::Completed {
            break;
        }
    }
    assert_eq!(
        phases,
        vec![
            PlannedFailoverPhase::Draining,
            PlannedFailoverPhase::Promoting,
            PlannedFailoverPhase::Completed
        ]
    );
    assert_eq!(world.memory.active_site, "pdx");
    assert_eq!(world.memory.topology_generation, 2);
    let record = world.memory.last_failover.clone().unwrap();
    assert_eq!(record.kind, FailoverKind::Planned);
    assert_eq!(record.lost_transactions, 0);
    assert!(record.exact);
    let (started, fenced, promoted, completed) = (
        record.started_at.unwrap(),
        record.fenced_at.unwrap(),
        record.promoted_at.unwrap(),
        record.completed_at.unwrap(),
    );
    assert!(started <= fenced && fenced <= promoted && promoted < completed);
    let (started, fenced, promoted, completed) = (
        record.started_at.unwrap(),
        record.fenced_at.unwrap(),
        record.promoted_at.unwrap(),
        record.completed_at.unwrap(),
    );
    assert!(started <= fenced && fenced <= promoted && promoted < completed);
    // Nothing iad committed is missing on pdx.
    let lost =
        bloodraven_mysql::lost_transactions(&world.site("iad").gtid, &world.site("pdx").gtid);
    assert!(lost.is_empty(), "lost {lost}");
    assert!(world.split_brain_at.is_empty());
    assert!(world
        .revocations
        .contains(&(RevokeReason::TopologyChanged, 2)));
    assert_eq!(
        world.annotations.planned_failover, None,
        "annotation cleared"
    );
    // The old primary rejoins as a replica of pdx.
    world.run_polls(1);
    assert_eq!(world.memory.site("iad").unwrap().state, SiteState::Replica);
    assert_eq!(world.site("iad").source.as_deref(), Some("pdx"));
    assert!(world.taints.is_empty());
}

#[test]
fn planned_promote_drains_up_to_the_old_primarys_gtid_set() {
    // docs/design/operator.md#planned-failover / docs/design/history.md#issue-8: the target
    // applies everything the fenced old primary committed before it detaches (replication
    // running: the old primary sends).
    let mut world = World::bootstrapped();
    for _ in 0..5 {
        assert!(world.write("iad"));
    }
    request(&mut world, "pdx");
    run_to_final(&mut world);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Completed));
    let drains: Vec<&PromoteDrain> = world
        .decisions
        .iter()
        .flat_map(|(_, decision)| &decision.actions)
        .filter_map(|action| match action {
            Action::Promote { site, request } if site == "pdx" => Some(&request.drain),
            _ => None,
        })
        .collect();
    assert!(!drains.is_empty(), "pdx was told to promote");
    let iad = world.site("iad").gtid.to_string();
    for drain in drains {
        assert_eq!(drain, &PromoteDrain::UntilGtidSet(iad.clone()));
    }
}

#[test]
fn planned_draining_fences_old_primary_role_fenced_read_only_connections_killed() {
    // docs/design/requirements.md R000.9 / docs/design/operator.md#planned-failover: Draining
    // stamps role=fenced, read_only, connections killed.
    let mut world = World::bootstrapped();
    request(&mut world, "pdx");
    world.run_polls(1);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Draining));
    let (_, decision) = world.decisions.last().unwrap();
    let fence = decision.actions.iter().find_map(|a| match a {
        Action::Fence { site, request } if site == "iad" => Some(request.clone()),
        _ => None,
    });
    assert!(fence.expect("iad fenced").kill_connections);
    assert_eq!(labels_of(decision, "iad"), Some((PodRole::Fenced, false)));
    assert!(world.site("iad").read_only);
    assert!(
        !decision.memory.authority.is_valid(),
        "no primary while the authority moves"
    );
}

#[test]
fn planned_inside_cooldown_with_reject_is_rejected() {
    // docs/design/requirements.md R001.12: inside the cooldown, onCooldown: reject (default)
    // fails the request (phase Rejected).
    let mut world = World::bootstrapped();
    request(&mut world, "pdx");
    run_to_final(&mut world);
    world.run_polls(1);
    request(&mut world, "iad");
    world.run_polls(1);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Rejected));
    assert_eq!(world.memory.active_site, "pdx");
    assert_eq!(
        world.events_of(EventReason::PlannedFailoverRejected).len(),
        1
    );
    assert_eq!(world.annotations.planned_failover, None);
}

#[test]
fn planned_inside_cooldown_with_defer_waits_until_cooldown_until_then_proceeds() {
    // docs/design/requirements.md R001.12: onCooldown: defer parks the request in Deferred
    // until cooldownUntil.
    let mut spec = crate::support::playground_spec();
    spec.planned_failover.on_cooldown = OnCooldown::Defer;
    let mut world = World::with_spec(spec);
    world.poll();
    world.run_polls(3);
    request(&mut world, "pdx");
    run_to_final(&mut world);
    world.run_polls(1);
    let cooldown_until = world.memory.cooldown_until.unwrap();
    request(&mut world, "iad");
    world.run_polls(1);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Deferred));
    let admission = world
        .memory
        .planned_failover
        .as_ref()
        .unwrap()
        .admission
        .clone();
    assert_eq!(admission.defer_reason, Some(DeferReason::Cooldown));
    assert_eq!(admission.retry_time, Some(cooldown_until));
    let deferred_metrics = world
        .decisions
        .iter()
        .flat_map(|(_, d)| d.actions.iter())
        .filter(|a| {
            matches!(
                a,
                Action::Metric(MetricObservation::PlannedFailoverDeferred)
            )
        })
        .count();
    assert_eq!(deferred_metrics, 1);
    while world.now < cooldown_until {
        assert_eq!(
            world.memory.active_site, "pdx",
            "no promotion inside the cooldown"
        );
        world.run_polls(1);
    }
    run_to_final(&mut world);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Completed));
    assert_eq!(world.memory.active_site, "iad");
    assert!(
        world
            .memory
            .last_failover
            .as_ref()
            .unwrap()
            .promoted_at
            .unwrap()
            >= cooldown_until
    );
}

#[test]
fn seed_003_live_hold_defers_planned_failover_with_deployment_hold_and_earliest_expiry() {
    let mut world = World::bootstrapped();
    let expiry = world.now + Duration::from_secs(30);
    world.hold = Some(HoldInfo {
        earliest_expiry: expiry,
        operation_id: "a1c3f0e2".to_string(),
        instance: "counter-app".to_string(),
    });
    request(&mut world, "pdx");
    world.run_polls(1);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Deferred));
    let admission = world
        .memory
        .planned_failover
        .as_ref()
        .unwrap()
        .admission
        .clone();
    assert_eq!(admission.defer_reason, Some(DeferReason::DeploymentHold));
    assert_eq!(admission.retry_time, Some(expiry));
    let message = admission.message.unwrap();
    assert!(
        message.contains("a1c3f0e2") && message.contains("counter-app"),
        "{message}"
    );
    // A renewal pushes retryTime along.
    let renewed = expiry + Duration::from_secs(20);
    world.hold.as_mut().unwrap().earliest_expiry = renewed;
    world.run_polls(1);
    let admission = world
        .memory
        .planned_failover
        .as_ref()
        .unwrap()
        .admission
        .clone();
    assert_eq!(admission.retry_time, Some(renewed));
    assert_eq!(world.memory.active_site, "iad");
    // The hold lapses: re-admitted, proceeds on its own.
    world.hold = None;
    run_to_final(&mut world);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Completed));
    assert_eq!(world.memory.active_site, "pdx");
}

#[test]
fn planned_to_a_read_only_or_unknown_or_active_site_is_rejected() {
    // docs/design/operator.md#planned-failover: planned failover moves the authority to another
    // read-write site only.
    for target in ["reader", "nowhere", "iad"] {
        let mut world = World::bootstrapped();
        request(&mut world, target);
        world.run_polls(1);
        assert_eq!(
            phase(&world),
            Some(PlannedFailoverPhase::Rejected),
            "{target}"
        );
        assert_eq!(world.memory.active_site, "iad");
        assert_eq!(world.memory.topology_generation, 1);
    }
}

#[test]
fn a_handled_request_whose_annotation_removal_failed_is_not_repeated() {
    // docs/design/requirements.md R001.15: a failed mutation (the annotation removal) is an
    // unknown, re-read; never replayed as a new request.
    let mut world = World::bootstrapped();
    request(&mut world, "reader");
    world.run_polls(1);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Rejected));
    // The removal failed: the annotation is still there on the next poll.
    request(&mut world, "reader");
    world.run_polls(1);
    assert_eq!(
        world.events_of(EventReason::PlannedFailoverRejected).len(),
        1
    );
    assert_eq!(
        world.annotations.planned_failover, None,
        "removal re-issued"
    );
}

#[test]
fn planned_draining_aborts_and_reasserts_old_site_when_target_cannot_catch_up() {
    // docs/design/operator.md#planned-failover: zero lost transactions -- a target that cannot
    // hold every transaction of the old primary is never promoted.
    let mut world = World::bootstrapped();
    request(&mut world, "pdx");
    world.run_polls(1);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Draining));
    // pdx stops receiving (cut from its peers) and iad had a transaction it lacks.
    world.site_mut("pdx").peer_cut = true;
    let extra = bloodraven_mysql::Gtid::mariadb(0, 1, 999);
    world.site_mut("iad").gtid.insert(extra);
    run_to_final(&mut world);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Rejected));
    assert_eq!(
        world.events_of(EventReason::PlannedFailoverAborted).len(),
        1
    );
    assert_eq!(world.memory.active_site, "iad");
    world.run_polls(2);
    assert_eq!(world.writable_sites(), vec!["iad".to_string()]);
    assert!(world.memory.authority.is_valid());
}

#[test]
fn seed_003_hold_outliving_the_admission_bound_re_enters_admitting_and_revalidates() {
    // docs/design/requirements.md R003.16: "Once the hold is released or runs out, the
    // switchover goes back to `Admitting`, is validated again, and continues without help."
    // Time spent Deferred is not time spent failing admission: a hold renewed for longer than
    // the admission bound must not get the request rejected the first poll its target is
    // briefly not ready.
    let mut world = World::bootstrapped();
    let expiry = world.now + Duration::from_secs(400);
    world.hold = Some(HoldInfo {
        earliest_expiry: expiry,
        operation_id: "a1c3f0e2".to_string(),
        instance: "counter-app".to_string(),
    });
    request(&mut world, "pdx");
    world.run_polls(1);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Deferred));
    while world.now < expiry {
        world.run_polls(1);
    }
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Deferred));
    // The hold lapses while pdx's replication is briefly stopped.
    world.hold = None;
    world.site_mut("pdx").running = false;
    world.run_polls(1);
    assert_eq!(
        phase(&world),
        Some(PlannedFailoverPhase::Admitting),
        "re-entered Admitting, not rejected"
    );
    world.site_mut("pdx").running = true;
    run_to_final(&mut world);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Completed));
    assert_eq!(world.memory.active_site, "pdx");
}

#[test]
fn seed_003_released_hold_shows_admitting_before_draining() {
    // docs/design/requirements.md R003.16: the switchover re-enters Admitting when the hold
    // lapses, then proceeds.
    let mut world = World::bootstrapped();
    world.hold = Some(HoldInfo {
        earliest_expiry: world.now + Duration::from_secs(30),
        operation_id: "a1c3f0e2".to_string(),
        instance: "counter-app".to_string(),
    });
    request(&mut world, "pdx");
    world.run_polls(2);
    world.hold = None;
    let mut phases = vec![phase(&world).unwrap()];
    for _ in 0..10 {
        world.run_polls(1);
        let current = phase(&world).unwrap();
        if phases.last() != Some(&current) {
            phases.push(current);
        }
    }
    assert_eq!(
        phases[..3],
        [
            PlannedFailoverPhase::Deferred,
            PlannedFailoverPhase::Admitting,
            PlannedFailoverPhase::Draining
        ]
    );
    assert_eq!(phases.last(), Some(&PlannedFailoverPhase::Completed));
}

#[test]
fn planned_draining_longer_than_the_detection_floor_does_not_fail_the_fenced_old_primary() {
    // docs/design/operator.md#per-site-health-and-labels: failure detection is for a site whose
    // sidecar or MySQL fails; a primary read-only because planned failover's Draining fenced it
    // on purpose is not failing.
    let mut world = World::bootstrapped();
    request(&mut world, "pdx");
    world.run_polls(1);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Draining));
    world.site_mut("pdx").peer_cut = true;
    world
        .site_mut("iad")
        .gtid
        .insert(bloodraven_mysql::Gtid::mariadb(0, 1, 999));
    world.run_polls(5);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Draining));
    assert!(
        world.events_of(EventReason::SiteFailed).is_empty(),
        "no SiteFailed for a fenced old primary"
    );
    assert_ne!(
        world.memory.site("iad").unwrap().detection,
        bloodraven_core::engine::Detection::Failed
    );
    world.site_mut("pdx").peer_cut = false;
    run_to_final(&mut world);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Completed));
}

#[test]
fn planned_draining_old_primary_dying_hands_over_to_emergency_without_waiting_out_the_drain_bound()
{
    // An experienced SRE's expectation: a primary that dies while a planned failover drains
    // it is an emergency, detected on the usual budget, not a 60 s Draining timeout.
    let mut world = World::bootstrapped();
    request(&mut world, "pdx");
    world.run_polls(1);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Draining));
    // pdx cannot catch up before iad dies.
    world.site_mut("pdx").peer_cut = true;
    world
        .site_mut("iad")
        .gtid
        .insert(bloodraven_mysql::Gtid::mariadb(0, 1, 999));
    world.run_polls(1);
    world.kill("iad");
    world.site_mut("pdx").peer_cut = false;
    let killed_at = world.now;
    world.run_polls_until_active("pdx", 30);
    let record = world.memory.last_failover.clone().unwrap();
    assert_eq!(record.kind, FailoverKind::Emergency);
    let promoted = record.promoted_at.unwrap();
    assert!(
        promoted.saturating_duration_since(killed_at)
            < bloodraven_core::engine::PLANNED_DRAIN_TIMEOUT,
        "promoted {:?} after the kill",
        promoted.saturating_duration_since(killed_at)
    );
    // iad's 999 reached the reader, not pdx; pdx fetched it from the reader before it was
    // promoted (emergency catch-up), so nothing was lost.
    assert!(world
        .site("pdx")
        .gtid
        .contains_gtid(&bloodraven_mysql::Gtid::mariadb(0, 1, 999)));
    assert_eq!(record.lost_transactions, 0, "{record:?}");
    world.run_polls(3);
    assert!(world.split_brain_at.is_empty());
    assert_eq!(world.writable_sites(), vec!["pdx".to_string()]);
}

#[test]
fn seed_003_deferred_planned_failover_is_unstable_automatic_failover_held() {
    use bloodraven_core::deploy::Stability;
    use bloodraven_core::engine::{lease_stability, unstable_reason, UnstableReason};
    let mut world = World::bootstrapped();
    world.run_polls(1);
    assert_eq!(unstable_reason(&world.memory), None);
    world.hold = Some(HoldInfo {
        earliest_expiry: world.now + Duration::from_secs(30),
        operation_id: "a1c3f0e2".to_string(),
        instance: "counter-app".to_string(),
    });
    request(&mut world, "pdx");
    world.run_polls(1);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Deferred));
    assert_eq!(
        unstable_reason(&world.memory),
        Some(UnstableReason::AutomaticFailoverHeld)
    );
    assert_eq!(
        lease_stability(&world.memory, Duration::from_secs(2)),
        Stability::Confirmed,
        "the hold that defers the switchover stays renewable"
    );
    world.hold = None;
    run_to_final(&mut world);
    world.run_polls(1);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Completed));
    assert_eq!(unstable_reason(&world.memory), None);
}

#[test]
fn planned_draining_target_dying_aborts_and_reasserts_the_old_primary_without_waiting_out_the_drain_bound(
) {
    // The old primary is fenced while Draining: every second spent waiting for a dead target
    // is a write outage. A target detected failed ends Draining at once (abort, old site
    // re-asserted), instead of after PLANNED_DRAIN_TIMEOUT.
    let mut world = World::bootstrapped();
    request(&mut world, "pdx");
    world.run_polls(1);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Draining));
    world.site_mut("pdx").peer_cut = true;
    world
        .site_mut("iad")
        .gtid
        .insert(bloodraven_mysql::Gtid::mariadb(0, 1, 999));
    world.run_polls(1);
    world.kill("pdx");
    let killed_at = world.now;
    run_to_final(&mut world);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Rejected));
    let aborted_at = world
        .events
        .iter()
        .find(|(_, e)| e.reason == EventReason::PlannedFailoverAborted)
        .map(|(at, _)| *at)
        .expect("aborted");
    assert!(
        aborted_at.saturating_duration_since(killed_at) < Duration::from_secs(15),
        "aborted {:?} after the target died",
        aborted_at.saturating_duration_since(killed_at)
    );
    world.run_polls(2);
    assert_eq!(world.memory.active_site, "iad");
    assert_eq!(world.writable_sites(), vec!["iad".to_string()]);
}

#[test]
fn planned_admission_waits_for_the_target_lag_within_max_lag_seconds() {
    // Draining fences the old primary: a target far behind would turn the switchover into a
    // write outage bounded only by PLANNED_DRAIN_TIMEOUT. Admission waits (Admitting) until
    // the target reports a lag within maxLagSeconds (30 s in the playground).
    let mut world = World::bootstrapped();
    world.site_mut("pdx").seconds_behind = 120;
    request(&mut world, "pdx");
    world.run_polls(3);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Admitting));
    assert_eq!(world.memory.active_site, "iad");
    assert_eq!(world.writable_sites(), vec!["iad".to_string()]);
    world.site_mut("pdx").seconds_behind = 0;
    run_to_final(&mut world);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Completed));
    assert_eq!(world.memory.active_site, "pdx");
}

#[test]
fn stale_draining_planned_failover_is_dropped_not_reasserted() {
    // docs/design/requirements.md R001.4 (authority is never handed to a site that might not be
    // the writer) and the simulator's --status-revert finding (seed 450): a planned failover
    // restored in Draining whose `from` is no longer the active site is dropped; `from` is
    // never re-asserted and no authority moves because of it.
    let mut world = World::bootstrapped();
    request(&mut world, "pdx");
    world.run_polls(1);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Draining));
    // Memory now says another site is active (as after adopting a newer authority).
    world.memory.active_site = "pdx".to_string();
    let generation = world.memory.topology_generation;
    let decision = world.poll();
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Rejected));
    assert_eq!(world.memory.active_site, "pdx");
    assert_eq!(world.memory.topology_generation, generation);
    assert!(
        !decision.actions.iter().any(|action| matches!(
            action,
            Action::PushAuthority { authority, .. } if authority.active_site.as_deref() == Some("iad")
        )),
        "iad must not be re-asserted: {:?}",
        decision.actions
    );
}

#[test]
fn seed_003_a_hold_granted_after_the_read_defers_the_poll_that_would_fence() {
    // docs/design/history.md#issue-10-case-6: the poll that enters Draining is the one the
    // shell gates (`gated_start`); deciding that same poll again with the hold the shell's
    // re-check found defers it with DeploymentHold and fences nothing. Over a whole run without
    // a hold only that poll is gated, and the gate may reopen once the failover completed.
    let mut world = World::bootstrapped();
    request(&mut world, "pdx");
    let before = world.memory.clone();
    let observation = world.observe();
    let decision = decide(&world.spec, &before, &observation, world.now);
    let fences = |decision: &Decision| {
        decision
            .actions
            .iter()
            .any(|action| matches!(action, Action::Fence { .. }))
    };
    let start = gated_start(&before, &decision.memory).expect("entering Draining is gated");
    assert_eq!((start.from.as_str(), start.target.as_str()), ("iad", "pdx"));
    assert_eq!(start.topology_generation, before.topology_generation);
    assert!(fences(&decision), "the unchecked decision fences iad");

    let expiry = world.now + Duration::from_secs(30);
    let mut late = observation.clone();
    late.deploy_hold = Some(HoldInfo {
        earliest_expiry: expiry,
        operation_id: "a1c3f0e2".to_string(),
        instance: "counter-app".to_string(),
    });
    let redecided = decide(&world.spec, &before, &late, world.now);
    assert_eq!(gated_start(&before, &redecided.memory), None);
    assert!(!fences(&redecided), "{:?}", redecided.actions);
    let planned = redecided.memory.planned_failover.as_ref().unwrap();
    assert_eq!(planned.phase, PlannedFailoverPhase::Deferred);
    assert_eq!(
        planned.admission.defer_reason,
        Some(DeferReason::DeploymentHold)
    );
    assert_eq!(planned.admission.retry_time, Some(expiry));
    assert!(!deferrable_disruption_in_flight(&redecided.memory));

    // Without the hold: exactly one gated start, the first fencing poll; in flight until
    // Completed.
    let run_start = world.decisions.len();
    run_to_final(&mut world);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Completed));
    let run = &world.decisions[run_start..];
    let mut previous = before;
    let mut starts = Vec::new();
    for (index, (_, decision)) in run.iter().enumerate() {
        if gated_start(&previous, &decision.memory).is_some() {
            starts.push(index);
        }
        previous = decision.memory.clone();
    }
    let first_fence = run.iter().position(|(_, decision)| fences(decision));
    assert_eq!(starts.len(), 1, "{starts:?}");
    assert_eq!(starts.first().copied(), first_fence);
    assert!(!deferrable_disruption_in_flight(&world.memory));
}

#[test]
fn planned_failover_resumed_after_a_restart_mid_drain_lets_the_old_primary_rejoin() {
    // Found by the restart test of docs/design/history.md#issue-12: a restart while Draining
    // read the old primary (still status.activeSite, its pod role=fenced) back as Active, so
    // after the promotion two sites were Active in memory and the old primary never rejoined as
    // a replica.
    let mut world = World::bootstrapped();
    request(&mut world, "pdx");
    world.run_polls(1);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Draining));
    let status = world.memory.to_status();
    world.memory =
        bloodraven_core::engine::GroupMemory::from_status(&world.spec, Some(&status), world.now);
    assert_eq!(world.memory.site("iad").unwrap().state, SiteState::Demoted);
    run_to_final(&mut world);
    assert_eq!(phase(&world), Some(PlannedFailoverPhase::Completed));
    world.run_polls(3);
    assert_eq!(world.memory.site("iad").unwrap().state, SiteState::Replica);
    assert_eq!(world.memory.site("pdx").unwrap().state, SiteState::Active);
}
