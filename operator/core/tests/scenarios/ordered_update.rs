//! Core scenarios: ordered update (docs/design/history.md#issue-12-part-1;
//! docs/design/operator.md#ordered-update-and-restore-in-place; docs/design/requirements.md
//! R003.17: ordered updates "wait behind the same hold in the same way"; R003.19: "the failover
//! that is part of an ordered update" bumps topologyGeneration).

use crate::support::World;
use bloodraven_api::{DeferReason, FailoverKind, OnCooldown, OrderedUpdatePhase, RestorePhase};
use bloodraven_core::deploy::{DisruptionKind, HoldInfo, RevokeReason};
use bloodraven_core::engine::{
    gated_start, unstable_reason, Action, EventReason, GroupMemory, UnstableReason,
    UPDATE_STEP_TIMEOUT,
};
use bloodraven_core::time::Duration;

const NEW: &str = "mariadb:10.11-new";

fn phase(world: &World) -> Option<OrderedUpdatePhase> {
    world.memory.ordered_update.as_ref().map(|u| u.phase)
}

/// The sites recreated, in the order of their first `RollSite`.
fn roll_order(world: &World) -> Vec<String> {
    let mut order: Vec<String> = Vec::new();
    for (_, decision) in &world.decisions {
        for action in &decision.actions {
            if let Action::RollSite { site, .. } = action {
                if !order.contains(site) {
                    order.push(site.clone());
                }
            }
        }
    }
    order
}

/// Polls (with a write on every writable site before each poll) until the update reaches a
/// final phase, at most `max_polls`; returns the writes acknowledged, by site.
fn run_update(world: &mut World, max_polls: usize) -> Vec<(String, bloodraven_mysql::GtidSet)> {
    let mut acknowledged = Vec::new();
    for _ in 0..max_polls {
        for site in ["iad", "pdx"] {
            let before = world.site(site).gtid.clone();
            if world.write(site) {
                acknowledged.push((site.to_string(), before));
            }
        }
        world.run_polls(1);
        if matches!(
            phase(world),
            Some(OrderedUpdatePhase::Completed | OrderedUpdatePhase::Failed)
        ) {
            break;
        }
    }
    acknowledged
}

#[test]
fn issue_12_ordered_update_rolls_replicas_first_then_one_planned_failover_then_the_old_active() {
    let mut world = World::bootstrapped();
    let generation = world.memory.topology_generation;
    world.spec.image = NEW.to_string();
    let mut phases: Vec<OrderedUpdatePhase> = Vec::new();
    let mut writes_acknowledged = 0;
    for _ in 0..60 {
        for site in ["iad", "pdx"] {
            if world.write(site) {
                writes_acknowledged += 1;
            }
        }
        world.run_polls(1);
        // At most one site is ever recreated per decision, and never the active one (the
        // latter is asserted inside core too).
        let (_, last) = world.decisions.last().unwrap();
        let rolls: Vec<&Action> = last
            .actions
            .iter()
            .filter(|a| matches!(a, Action::RollSite { .. }))
            .collect();
        assert!(rolls.len() <= 1, "{rolls:?}");
        let current = phase(&world).unwrap();
        // Admitting: between two steps, waiting for the group to be healthy.
        if phases.last() != Some(&current) && current != OrderedUpdatePhase::Admitting {
            phases.push(current);
        }
        if current == OrderedUpdatePhase::Completed {
            break;
        }
    }
    assert_eq!(
        phases,
        vec![
            OrderedUpdatePhase::RollingReplica,
            OrderedUpdatePhase::FailingOver,
            OrderedUpdatePhase::RollingOldActive,
            OrderedUpdatePhase::Completed,
        ],
        "replicas first, then the failover, then the old active site"
    );
    assert_eq!(roll_order(&world), vec!["pdx", "reader", "iad"]);
    for site in ["iad", "pdx", "reader"] {
        assert_eq!(world.site(site).image, NEW, "{site}");
        assert_eq!(world.site(site).rolls, 1, "{site} recreated exactly once");
    }
    assert_eq!(world.memory.active_site, "pdx");
    assert_eq!(
        world.memory.topology_generation,
        generation + 1,
        "exactly one failover, which bumps topologyGeneration"
    );
    assert!(world
        .revocations
        .contains(&(RevokeReason::TopologyChanged, generation + 1)));
    let record = world.memory.last_failover.clone().unwrap();
    assert_eq!(record.kind, FailoverKind::Planned);
    assert_eq!(record.lost_transactions, 0, "{record:?}");
    assert!(record.exact);
    assert!(writes_acknowledged > 0);
    assert!(world.split_brain_at.is_empty());
    // Every write ever committed on iad is on the new primary: zero lost writes.
    assert!(world.site("pdx").gtid.union(&world.site("iad").gtid) == world.site("pdx").gtid);
    let update = world.memory.ordered_update.clone().unwrap();
    assert!(update.sites.iter().all(|site| site.updated), "{update:?}");
    assert_eq!(world.events_of(EventReason::OrderedUpdateStarted).len(), 1);
    assert_eq!(
        world.events_of(EventReason::OrderedUpdateRollingSite).len(),
        3
    );
    assert_eq!(
        world.events_of(EventReason::OrderedUpdateSiteUpdated).len(),
        3
    );
    assert_eq!(
        world.events_of(EventReason::OrderedUpdateCompleted).len(),
        1
    );
    assert_eq!(
        world.events_of(EventReason::PlannedFailoverCompleted).len(),
        1
    );
    // Settled: nothing more happens.
    let rolls_before = world.decisions.len();
    world.run_polls(5);
    assert_eq!(phase(&world), Some(OrderedUpdatePhase::Completed));
    assert!(world.decisions[rolls_before..].iter().all(|(_, d)| !d
        .actions
        .iter()
        .any(|a| matches!(a, Action::RollSite { .. }))));
    assert_eq!(world.annotations.planned_failover, None);
}

#[test]
fn issue_12_an_unchanged_image_starts_nothing() {
    let mut world = World::bootstrapped();
    world.run_polls(5);
    assert_eq!(phase(&world), None);
    assert!(world.decisions.iter().all(|(_, d)| !d
        .actions
        .iter()
        .any(|a| matches!(a, Action::RollSite { .. }))));
}

#[test]
fn issue_12_a_recreated_site_must_be_healthy_again_before_the_next_one_and_a_stuck_one_fails_the_update(
) {
    let mut world = World::bootstrapped();
    world.site_mut("pdx").recreation_stalls = true;
    world.spec.image = NEW.to_string();
    world.run_polls(3);
    assert_eq!(phase(&world), Some(OrderedUpdatePhase::RollingReplica));
    let polls = (UPDATE_STEP_TIMEOUT.as_secs() / 2) as usize - 5;
    world.run_polls(polls);
    assert_eq!(
        phase(&world),
        Some(OrderedUpdatePhase::RollingReplica),
        "still waiting for pdx"
    );
    assert_eq!(
        roll_order(&world),
        vec!["pdx"],
        "nothing else is touched meanwhile"
    );
    world.run_polls(10);
    assert_eq!(phase(&world), Some(OrderedUpdatePhase::Failed));
    let message = world
        .memory
        .ordered_update
        .clone()
        .unwrap()
        .message
        .unwrap();
    assert!(
        message.contains("pdx") && message.contains("not healthy"),
        "{message}"
    );
    assert_eq!(world.events_of(EventReason::OrderedUpdateFailed).len(), 1);
    assert_eq!(
        world.memory.active_site, "iad",
        "no failover after a failed step"
    );
    // A failed update stays failed for that image.
    world.restart("pdx");
    world.run_polls(5);
    assert_eq!(phase(&world), Some(OrderedUpdatePhase::Failed));
    assert_eq!(roll_order(&world), vec!["pdx"]);
    // A new image starts a new update.
    world.spec.image = "mariadb:10.11-newer".to_string();
    world.site_mut("pdx").recreation_stalls = false;
    run_update(&mut world, 60);
    assert_eq!(phase(&world), Some(OrderedUpdatePhase::Completed));
}

#[test]
fn issue_12_the_readers_five_conjuncts_gate_the_next_step() {
    // docs/design/requirements.md R000.7-R000.8: a reader lagging beyond
    // EffectiveReadOnlyMaxLagSeconds is not healthy: the update does not move past it.
    let mut world = World::bootstrapped();
    world.spec.image = NEW.to_string();
    for _ in 0..20 {
        world.run_polls(1);
        if world.site("reader").image == NEW {
            break;
        }
    }
    assert_eq!(world.site("reader").image, NEW);
    world.site_mut("reader").seconds_behind = 31;
    world.run_polls(10);
    assert_eq!(phase(&world), Some(OrderedUpdatePhase::RollingReplica));
    assert_eq!(
        world.memory.active_site, "iad",
        "no failover while the reader lags"
    );
    world.site_mut("reader").seconds_behind = 0;
    run_update(&mut world, 60);
    assert_eq!(phase(&world), Some(OrderedUpdatePhase::Completed));
}

#[test]
fn seed_003_a_live_hold_defers_the_ordered_update_and_each_step_after_it() {
    let mut world = World::bootstrapped();
    let expiry = world.now + Duration::from_secs(30);
    world.hold = Some(HoldInfo {
        earliest_expiry: expiry,
        operation_id: "op-1".to_string(),
        instance: "counter-app".to_string(),
    });
    world.spec.image = NEW.to_string();
    world.run_polls(5);
    assert_eq!(phase(&world), Some(OrderedUpdatePhase::Deferred));
    let update = world.memory.ordered_update.clone().unwrap();
    assert_eq!(
        update.admission.defer_reason,
        Some(DeferReason::DeploymentHold)
    );
    assert_eq!(update.admission.retry_time, Some(expiry));
    assert!(update.admission.message.unwrap().contains("op-1"));
    assert!(
        roll_order(&world).is_empty(),
        "nothing recreated under the hold"
    );
    assert_eq!(world.events_of(EventReason::OrderedUpdateDeferred).len(), 1);
    world.hold = None;
    world.run_polls(1);
    assert_eq!(phase(&world), Some(OrderedUpdatePhase::RollingReplica));
    // A hold taken mid-update defers the next step; the recreation under way finishes.
    world.hold = Some(HoldInfo {
        earliest_expiry: world.now + Duration::from_secs(60),
        operation_id: "op-2".to_string(),
        instance: "counter-app".to_string(),
    });
    world.run_polls(10);
    assert_eq!(phase(&world), Some(OrderedUpdatePhase::Deferred));
    assert_eq!(roll_order(&world), vec!["pdx"]);
    assert_eq!(world.memory.active_site, "iad");
    world.hold = None;
    run_update(&mut world, 60);
    assert_eq!(phase(&world), Some(OrderedUpdatePhase::Completed));
    assert_eq!(world.memory.active_site, "pdx");
}

#[test]
fn seed_003_the_decision_starting_a_recreation_passes_the_hold_gate() {
    let mut world = World::bootstrapped();
    world.spec.image = NEW.to_string();
    let mut starts = Vec::new();
    for _ in 0..60 {
        let before: GroupMemory = world.memory.clone();
        world.run_polls(1);
        if let Some(start) = gated_start(&before, &world.memory) {
            starts.push((start.kind, start.target));
        }
        if phase(&world) == Some(OrderedUpdatePhase::Completed) {
            break;
        }
    }
    assert_eq!(
        starts,
        vec![
            (DisruptionKind::OrderedUpdate, "pdx".to_string()),
            (DisruptionKind::OrderedUpdate, "reader".to_string()),
            (DisruptionKind::PlannedFailover, "pdx".to_string()),
            (DisruptionKind::OrderedUpdate, "iad".to_string()),
        ]
    );
}

#[test]
fn seed_003_an_ordered_update_in_flight_makes_the_group_unstable() {
    let mut world = World::bootstrapped();
    assert_eq!(unstable_reason(&world.memory), None);
    world.spec.image = NEW.to_string();
    world.run_polls(1);
    assert_eq!(
        unstable_reason(&world.memory),
        Some(UnstableReason::OrderedUpdateInProgress)
    );
    run_update(&mut world, 60);
    world.run_polls(1);
    assert_eq!(unstable_reason(&world.memory), None);
}

#[test]
fn issue_12_inside_the_cooldown_reject_fails_the_update_and_defer_waits() {
    // onCooldown: reject.
    let mut world = World::bootstrapped();
    world.annotations.planned_failover = Some("pdx".to_string());
    world.run_polls_until_active("pdx", 20);
    world.run_polls(2);
    assert!(world.memory.cooldown_until.unwrap() > world.now);
    world.spec.image = NEW.to_string();
    world.run_polls(1);
    assert_eq!(phase(&world), Some(OrderedUpdatePhase::Failed));
    let message = world
        .memory
        .ordered_update
        .clone()
        .unwrap()
        .message
        .unwrap();
    assert!(message.contains("onCooldown: reject"), "{message}");
    assert!(roll_order(&world).is_empty());

    // onCooldown: defer.
    let mut spec = crate::support::playground_spec();
    spec.planned_failover.on_cooldown = OnCooldown::Defer;
    let mut world = World::with_spec(spec);
    world.poll();
    world.run_polls(3);
    world.annotations.planned_failover = Some("pdx".to_string());
    world.run_polls_until_active("pdx", 20);
    world.run_polls(2);
    let until = world.memory.cooldown_until.unwrap();
    world.spec.image = NEW.to_string();
    world.run_polls(1);
    assert_eq!(phase(&world), Some(OrderedUpdatePhase::Deferred));
    let update = world.memory.ordered_update.clone().unwrap();
    assert_eq!(update.admission.defer_reason, Some(DeferReason::Cooldown));
    assert_eq!(update.admission.retry_time, Some(until));
    while world.now < until {
        assert!(roll_order(&world).is_empty(), "nothing inside the cooldown");
        world.run_polls(1);
    }
    run_update(&mut world, 60);
    assert_eq!(phase(&world), Some(OrderedUpdatePhase::Completed));
    assert_eq!(world.memory.active_site, "iad");
}

#[test]
fn issue_12_an_operator_restart_mid_update_resumes_from_status() {
    let mut world = World::bootstrapped();
    world.spec.image = NEW.to_string();
    // Until pdx is done and the reader is being recreated.
    for _ in 0..30 {
        world.run_polls(1);
        if roll_order(&world).len() == 2 {
            break;
        }
    }
    assert_eq!(roll_order(&world), vec!["pdx", "reader"]);
    // The operator restarts: memory only from the status it wrote.
    let status = world.memory.to_status();
    world.memory = GroupMemory::from_status(&world.spec, Some(&status), world.now);
    assert_eq!(phase(&world), Some(OrderedUpdatePhase::RollingReplica));
    run_update(&mut world, 60);
    assert_eq!(phase(&world), Some(OrderedUpdatePhase::Completed));
    for site in ["iad", "pdx", "reader"] {
        assert_eq!(
            world.site(site).rolls,
            1,
            "{site} recreated once across the restart"
        );
    }

    // A restart during the failover resumes it too.
    let mut world = World::bootstrapped();
    world.spec.image = NEW.to_string();
    for _ in 0..40 {
        world.run_polls(1);
        if phase(&world) == Some(OrderedUpdatePhase::FailingOver) {
            break;
        }
    }
    assert_eq!(phase(&world), Some(OrderedUpdatePhase::FailingOver));
    world.run_polls(1);
    let status = world.memory.to_status();
    world.memory = GroupMemory::from_status(&world.spec, Some(&status), world.now);
    run_update(&mut world, 60);
    assert_eq!(
        phase(&world),
        Some(OrderedUpdatePhase::Completed),
        "{:?} {:?} {:?}",
        world.memory.ordered_update,
        world.memory.planned_failover,
        world.memory.sites
    );
    assert_eq!(world.memory.active_site, "pdx");
    assert_eq!(world.memory.last_failover.unwrap().lost_transactions, 0);
}

#[test]
fn issue_12_an_emergency_failover_during_the_update_takes_precedence_and_the_update_resumes() {
    let mut spec = crate::support::playground_spec();
    spec.planned_failover.on_cooldown = OnCooldown::Defer;
    let mut world = World::with_spec(spec);
    world.poll();
    world.run_polls(3);
    world.spec.image = NEW.to_string();
    for _ in 0..30 {
        world.run_polls(1);
        if world.site("pdx").image == NEW && roll_order(&world).len() == 2 {
            break;
        }
    }
    // The reader is being recreated when the active site dies.
    world.kill("iad");
    world.run_polls_until_active("pdx", 30);
    assert_eq!(
        world.memory.last_failover.clone().unwrap().kind,
        FailoverKind::Emergency
    );
    // iad returns (read-only, fenced, rejoins without errant transactions) and is updated
    // as a replica; no second failover is needed.
    world.restart("iad");
    run_update(&mut world, 120);
    assert_eq!(phase(&world), Some(OrderedUpdatePhase::Completed));
    for site in ["iad", "pdx", "reader"] {
        assert_eq!(world.site(site).image, NEW, "{site}");
    }
    assert_eq!(world.memory.active_site, "pdx");
    assert!(world.split_brain_at.is_empty());
}

#[test]
fn issue_12_a_planned_failover_requested_meanwhile_goes_alone() {
    // Found by the simulator (seed 22, --image-update): the annotation arrived in the poll
    // the update would recreate the reader, and the planned step drained the primary in the
    // same decision; the update now waits for the other planned failover to finish.
    let mut world = World::bootstrapped();
    world.spec.image = NEW.to_string();
    world.run_polls(1);
    assert_eq!(roll_order(&world), vec!["pdx"]);
    world.annotations.planned_failover = Some("pdx".to_string());
    let decision = world.poll();
    let rolled = decision
        .actions
        .iter()
        .any(|a| matches!(a, Action::RollSite { .. }));
    assert!(
        !rolled,
        "no recreation in the poll a planned failover is taken"
    );
    run_update(&mut world, 80);
    assert_eq!(phase(&world), Some(OrderedUpdatePhase::Completed));
}

#[test]
fn seed_003_an_emergency_during_a_recreation_starts_no_gated_disruption() {
    // Found by the simulator (seed 1284, --image-update): the step clock standing still
    // during an emergency failover read as a new recreation every poll, so a hold granted
    // meanwhile would have re-decided the poll and tripped the shell's gate assertion.
    let mut world = World::bootstrapped();
    world.site_mut("reader").recreation_stalls = true;
    world.spec.image = NEW.to_string();
    for _ in 0..10 {
        world.run_polls(1);
        if roll_order(&world).len() == 2 {
            break;
        }
    }
    assert_eq!(roll_order(&world), vec!["pdx", "reader"]);
    world.kill("iad");
    for _ in 0..15 {
        let before = world.memory.clone();
        world.run_polls(1);
        assert_eq!(gated_start(&before, &world.memory), None);
    }
}

#[test]
fn issue_12_a_restore_requested_meanwhile_never_overlaps_a_step_of_the_update() {
    // Found by the simulator (seed 10, `--all-faults --restore --image-update`): the update
    // recreated iad in the decision a pending restore fenced pdx, the active site: two
    // planned disruptions at once left one site serving. The restore now waits for the
    // update's step in flight, and the update starts no step while a restore is pending.
    let mut world = World::bootstrapped();
    assert!(world.write("iad"));
    world.run_polls(1);
    world.annotations.backup = Some("b1".to_string());
    world.run_polls(3);
    assert!(world.memory.last_backup.is_some());
    world.spec.image = NEW.to_string();
    world.run_polls(1);
    assert_eq!(roll_order(&world), vec!["pdx"], "pdx is being recreated");
    world.annotations.restore = Some("b1".to_string());
    let first = world.decisions.len();
    let mut restore_done = false;
    for _ in 0..120 {
        world.run_polls(1);
        let (_, decision) = world.decisions.last().unwrap();
        let rolled = decision
            .actions
            .iter()
            .any(|a| matches!(a, Action::RollSite { .. }));
        let restoring = world.memory.restore.as_ref().is_some_and(|restore| {
            matches!(
                restore.status.phase,
                RestorePhase::Fencing
                    | RestorePhase::Restoring
                    | RestorePhase::Promoting
                    | RestorePhase::Reseeding
            )
        });
        let stepping = matches!(
            phase(&world),
            Some(
                OrderedUpdatePhase::RollingReplica
                    | OrderedUpdatePhase::RollingOldActive
                    | OrderedUpdatePhase::FailingOver
            )
        );
        assert!(
            !(restoring && (rolled || stepping)),
            "poll {}: restore {:?} while the update is {:?} (rolled this poll: {rolled})",
            world.decisions.len() - first,
            world.memory.restore.as_ref().map(|r| r.status.phase),
            phase(&world)
        );
        restore_done |= world
            .memory
            .restore
            .as_ref()
            .is_some_and(|restore| restore.status.phase == RestorePhase::Completed);
        if restore_done && phase(&world) == Some(OrderedUpdatePhase::Completed) {
            break;
        }
    }
    assert!(
        restore_done,
        "{:?}",
        world.memory.restore.as_ref().map(|r| &r.status)
    );
    assert_eq!(phase(&world), Some(OrderedUpdatePhase::Completed));
    assert!(world.split_brain_at.is_empty());
}

/// Simulator seed 8103 with every fault mode on: a reverted status brought back a failed
/// restore whose record still withholds pdx awaiting its re-seed (labelled unhealthy). The
/// update recreated pdx, took it for healthy again on its replication conjuncts alone, and
/// recreated the reader while pdx's pod was labelled unhealthy. "Healthy" is now the labels'
/// own judgement: the update does not even start while pdx is withheld.
#[test]
fn sim_seed_8103_a_replica_a_restore_withholds_is_not_healthy_again() {
    let mut world = World::bootstrapped();
    world.run_polls(1);
    let status = bloodraven_api::RestoreStatus {
        phase: RestorePhase::Failed,
        backup: "b1".to_string(),
        method: bloodraven_api::RestoreMethod::Logical,
        site: "iad".to_string(),
        admission: bloodraven_api::Admission::default(),
        message: Some("restore of iad from b1 failed: re-seeding did not finish".to_string()),
        requested_at: Some(world.now),
        phase_since: Some(world.now),
        fenced_at: Some(world.now),
        restored_at: Some(world.now),
        promoted_at: Some(world.now),
        completed_at: None,
        topology_generation: Some(world.memory.topology_generation),
        fenced_gtid_set: None,
        backup_gtid_set: None,
        lost_transactions: 0,
        lost_gtid_set: None,
        exact: false,
        pending_reseed: vec!["pdx".to_string()],
        reseeded: vec!["reader".to_string()],
        earlier_discarded_gtid_set: None,
        discarded_since_failover: None,
    };
    world.memory.restore = Some(bloodraven_core::engine::RestoreMemory {
        status,
        annotation_cleared: true,
    });
    world.spec.image = NEW.to_string();
    world.run_polls(20);
    assert_eq!(
        roll_order(&world),
        Vec::<String>::new(),
        "no site is recreated while pdx is withheld: {:?}",
        world.memory.ordered_update
    );
    let last = &world.decisions.last().expect("decision").1;
    assert_eq!(
        crate::support::labels_of(last, "pdx"),
        Some((bloodraven_core::engine::PodRole::Replica, false))
    );
    let update = world.memory.ordered_update.clone().expect("update");
    assert_eq!(update.phase, OrderedUpdatePhase::Admitting);
    assert!(
        update.message.as_deref().is_some_and(|m| m.contains("pdx")),
        "{update:?}"
    );
}
