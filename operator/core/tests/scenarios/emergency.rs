//! Core scenarios: failure detection, emergency failover with the lease wait, returning
//! primary, primary reassertion, cooldown (docs/design/requirements.md R000, R001, R003;
//! docs/design/operator.md).

use crate::support::{labels_of, position, World};
use bloodraven_api::sidecar::PromoteDrain;
use bloodraven_api::FailoverKind;
use bloodraven_core::deploy::{HoldInfo, RevokeReason};
use bloodraven_core::engine::{
    Action, AnnotationChange, Detection, EmergencyPhase, EventReason, PodRole, SiteState,
    AGENTLESS_KILL_PATIENCE, CLOCK_DRIFT_MARGIN, SIDECAR_NOT_READY_WITHIN,
};
use bloodraven_core::time::Duration;

fn promoted_at(world: &World) -> Option<bloodraven_core::time::Timestamp> {
    world
        .memory
        .last_failover
        .as_ref()
        .and_then(|f| f.promoted_at)
}

#[test]
fn detection_needs_failure_threshold_consecutive_failed_polls() {
    // docs/design/requirements.md R001.9 / docs/design/operator.md#per-site-health-and-labels:
    // a site failing failureThreshold (3) consecutive polls is failed.
    let mut world = World::bootstrapped();
    world.kill("pdx");
    world.run_polls(2);
    assert_eq!(
        world.memory.site("pdx").unwrap().detection,
        Detection::Suspect
    );
    world.run_polls(1);
    assert_eq!(
        world.memory.site("pdx").unwrap().detection,
        Detection::Failed
    );
    assert_eq!(world.memory.site("pdx").unwrap().consecutive_failures, 3);
}

/// pdx's detection after each of `polls` polls `gap` apart, pdx killed before the first.
fn pdx_detection_per_poll(polls: usize, gap: Duration) -> Vec<Detection> {
    let mut world = World::bootstrapped();
    world.kill("pdx");
    (0..polls)
        .map(|_| {
            world.advance(gap);
            world.poll();
            world.memory.site("pdx").unwrap().detection
        })
        .collect()
}

#[test]
fn detection_floor_is_poll_interval_times_threshold_even_with_faster_polls() {
    // Polls 1 s apart instead of 2 s: three failed polls span only 3 s < the 6 s floor;
    // 5 polls 1 s apart + 1 interval = 6 s.
    let detection = pdx_detection_per_poll(5, Duration::from_secs(1));
    assert_eq!(detection[3], Detection::Suspect);
    assert_eq!(detection[4], Detection::Failed);
}

#[test]
fn polls_landing_a_little_early_still_detect_at_the_threshold_th_failed_poll() {
    // A fixed-rate poller's readings jitter by milliseconds: failed polls 1.999 s apart span
    // 3.998 s + one interval, a hair under the 6 s floor. Detection must still land at the
    // third failed poll (docs/design/requirements.md R001.9: 2 s x 3 = 6 s), not a whole poll
    // later (it did: 8 s, s020).
    let detection = pdx_detection_per_poll(3, Duration::from_millis(1_999));
    assert_eq!(
        detection,
        [Detection::Suspect, Detection::Suspect, Detection::Failed]
    );
}

#[test]
fn a_recovered_poll_resets_the_failure_count() {
    // docs/design/operator.md#per-site-health-and-labels: failures must be consecutive; one
    // answered poll resets consecutiveFailures.
    let mut world = World::bootstrapped();
    world.site_mut("pdx").operator_cut = true;
    world.run_polls(2);
    world.site_mut("pdx").operator_cut = false;
    world.run_polls(1);
    assert_eq!(world.memory.site("pdx").unwrap().consecutive_failures, 0);
    assert_eq!(world.memory.site("pdx").unwrap().detection, Detection::Up);
}

#[test]
fn emergency_failover_promotes_pdx_after_detection_and_lease_wait() {
    // docs/design/operator.md#emergency-failover + docs/design/requirements.md R003.20:
    // detection floor, lease wait, topologyGeneration += 1, every lease revoked
    // (TopologyChanged), lastFailover as a lower bound.
    let mut world = World::bootstrapped();
    for _ in 0..5 {
        assert!(world.write("iad"));
    }
    world.advance(Duration::from_secs(1));
    world.kill("iad");
    let killed_at = world.now;
    world.run_polls_until_active("pdx", 20);
    assert_eq!(world.memory.topology_generation, 2, "generation += 1");
    let promoted = promoted_at(&world).unwrap();
    let floor = world.spec.detection_floor();
    let lease = world.spec.effective_write_lease();
    assert!(
        promoted.saturating_duration_since(killed_at) >= floor,
        "promotion never precedes the detection floor"
    );
    // Lease wait: the last grant to iad happened at or before the kill; promotion waited
    // until it was older than lease + margin.
    assert!(promoted.saturating_duration_since(killed_at) > lease + CLOCK_DRIFT_MARGIN);
    assert!(world.split_brain_at.is_empty());
    // Every deploy lease revoked with TopologyChanged under the new generation.
    assert!(world
        .revocations
        .contains(&(RevokeReason::TopologyChanged, 2)));
    // Completion: pdx writable, reader repointed to pdx.
    world.run_polls(2);
    assert_eq!(world.writable_sites(), vec!["pdx".to_string()]);
    assert_eq!(world.site("reader").source.as_deref(), Some("pdx"));
    let record = world.memory.last_failover.clone().unwrap();
    assert_eq!(record.kind, FailoverKind::Emergency);
    assert_eq!((record.from.as_str(), record.to.as_str()), ("iad", "pdx"));
    assert!(record.completed_at.is_some());
    assert!(!record.exact, "a lower bound until iad is readable again");
    assert_eq!(
        record.lost_transactions, 0,
        "everything replicated instantly in this world"
    );
    assert!(record.started_at <= record.detected_at && record.detected_at <= record.promoted_at);
}

#[test]
fn emergency_promote_drains_everything_the_candidate_received() {
    // docs/design/history.md#issue-8 / docs/design/requirements.md R001.8 (the RPO is what had
    // replicated): the emergency candidate is told to apply everything it received before
    // detaching, never to discard its relay log.
    let mut world = World::bootstrapped();
    world.kill("iad");
    world.run_polls_until_active("pdx", 20);
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
    assert!(
        drains.iter().all(|drain| **drain == PromoteDrain::Received),
        "{drains:?}"
    );
}

#[test]
fn emergency_failover_taints_old_primary_node_before_any_cross_site_action() {
    // docs/design/requirements.md R000.17-R000.18: a pure function of a per-site transition,
    // applied earlier in the same poll than any cross-site action.
    let mut world = World::bootstrapped();
    world.kill("iad");
    world.run_polls(3);
    let (_, decision) = world.decisions.last().unwrap();
    assert!(decision
        .transitions
        .iter()
        .any(|t| t.site == "iad" && t.to == SiteState::Demoted));
    let taint = position(
        decision,
        |a| matches!(a, Action::TaintNode { node, .. } if node == "node-iad"),
    )
    .unwrap();
    let first_cross = position(decision, |a| {
        matches!(
            a,
            Action::AnnounceAuthorityMove { .. }
                | Action::PushAuthority { .. }
                | Action::Promote { .. }
                | Action::Repoint { .. }
                | Action::Fence { .. }
        )
    })
    .unwrap();
    assert!(
        taint < first_cross,
        "seed 000: the taint is applied earlier in the same poll than any cross-site action"
    );
    assert!(world.taints.contains("node-iad"));
}

#[test]
fn seed_000_read_only_site_is_never_tainted() {
    let mut world = World::bootstrapped();
    world.kill("reader");
    world.run_polls(6);
    assert!(world.taints.is_empty());
    let any_taint = world.decisions.iter().any(|(_, d)| {
        d.actions
            .iter()
            .any(|a| matches!(a, Action::TaintNode { .. }))
    });
    assert!(!any_taint);
}

#[test]
fn promotion_waits_for_a_majority_of_peers_last_grant_older_than_lease_plus_margin() {
    // iad is cut off from the operator only: it keeps its lease from its peers until they
    // get the move notice. The operator must not promote pdx while iad's lease may run.
    let mut world = World::bootstrapped();
    world.site_mut("iad").operator_cut = true;
    let mut promoted_poll = None;
    for poll in 0..20 {
        world.run_polls(1);
        if world.memory.active_site == "pdx" {
            promoted_poll = Some(poll);
            break;
        }
    }
    assert!(promoted_poll.is_some(), "pdx promoted eventually");
    let announced = world
        .decisions
        .iter()
        .find(|(_, d)| {
            d.actions
                .iter()
                .any(|a| matches!(a, Action::AnnounceAuthorityMove { .. }))
        })
        .map(|(t, _)| *t)
        .unwrap();
    let promoted = promoted_at(&world).unwrap();
    assert!(
        promoted.saturating_duration_since(announced)
            > world.spec.effective_write_lease() + CLOCK_DRIFT_MARGIN,
        "promotion at least lease + margin after the move notice"
    );
    world.run_polls(3);
    assert!(
        world.split_brain_at.is_empty(),
        "no two writable sites: {:?}",
        world.split_brain_at
    );
    assert_eq!(world.writable_sites(), vec!["pdx".to_string()]);
}

#[test]
fn unsafe_skip_lease_wait_promotes_early_and_split_brain_becomes_visible() {
    // docs/design/operator.md#authority-sidecars-and-fencing: "Never promote while the old site
    // could still write" -- the test-only switch proves the wait is what prevents split brain.
    let mut world = World::bootstrapped();
    world.options.unsafe_skip_lease_wait = true;
    world.site_mut("iad").operator_cut = true;
    world.run_polls(6);
    assert!(world.events_of(EventReason::LeaseWaitSkipped).len() == 1);
    assert!(
        !world.split_brain_at.is_empty(),
        "the switch must make split brain observable"
    );
}

#[test]
fn old_sidecar_confirming_read_only_ends_the_wait_early() {
    // iad's mysqld dies but its sidecar answers: the sidecar confirms MySQL down.
    let mut world = World::bootstrapped();
    world.site_mut("iad").mysql_up = false;
    world.run_polls(3);
    assert!(matches!(
        world.memory.emergency_failover.as_ref().map(|f| &f.phase),
        Some(EmergencyPhase::AwaitingLeaseExpiry)
    ));
    world.run_polls(1);
    assert!(world.events_of(EventReason::OldPrimaryFenced)[0]
        .message
        .contains("confirmed"));
    assert!(matches!(
        world.memory.emergency_failover.as_ref().map(|f| &f.phase),
        Some(EmergencyPhase::Draining { .. })
    ));
}

#[test]
fn returning_primary_with_errant_transactions_stays_fenced_and_lost_becomes_exact() {
    // docs/design/operator.md#returning-primary: kept role=fenced, errant set reported;
    // lostTransactions made exact once the old primary is readable.
    let mut world = World::bootstrapped();
    // iad commits 3 transactions pdx never receives, then dies.
    world.site_mut("pdx").peer_cut = true;
    world.site_mut("reader").peer_cut = true;
    let mut committed = 0;
    for _ in 0..3 {
        if world.write("iad") {
            committed += 1;
        }
    }
    assert_eq!(committed, 3);
    world.kill("iad");
    world.site_mut("pdx").peer_cut = false;
    world.site_mut("reader").peer_cut = false;
    world.run_polls(10);
    assert_eq!(world.memory.active_site, "pdx");
    let record = world.memory.last_failover.clone().unwrap();
    assert!(!record.exact);
    assert_eq!(
        record.lost_transactions, 0,
        "the operator never observed those 3: a lower bound"
    );
    // iad returns: read-only, kept fenced, errant set reported, lost made exact.
    world.restart("iad");
    world.run_polls(2);
    let iad = world.memory.site("iad").unwrap();
    assert_eq!(iad.state, SiteState::Demoted);
    assert_eq!(iad.errant.as_ref().map(|e| e.count()), Some(3));
    let (_, last) = world.decisions.last().unwrap();
    assert_eq!(labels_of(last, "iad"), Some((PodRole::Fenced, false)));
    let record = world.memory.last_failover.clone().unwrap();
    assert!(record.exact);
    assert_eq!(record.lost_transactions, 3);
    assert!(world.site("iad").read_only);
    assert!(
        world.taints.contains("node-iad"),
        "still tainted while fenced"
    );
    assert_eq!(
        world.events_of(EventReason::ReturningPrimaryFenced).len(),
        1
    );
    // A transaction it received before it froze commits after it was read (s021 live: the
    // operator said 1 lost, exact, and the old primary held 2): the count follows the set.
    let site = world.site_mut("iad");
    site.read_only = false;
    assert!(world.write("iad"));
    world.site_mut("iad").read_only = true;
    world.run_polls(1);
    let record = world.memory.last_failover.clone().unwrap();
    assert!(record.exact);
    assert_eq!(
        record.lost_transactions, 4,
        "exact as of the latest reading"
    );
    assert_eq!(
        world
            .memory
            .site("iad")
            .unwrap()
            .errant
            .as_ref()
            .map(|e| e.count()),
        Some(4)
    );
}

#[test]
fn returning_primary_without_errant_transactions_rejoins_as_replica_and_is_untainted() {
    // docs/design/operator.md#returning-primary: rejoins as a replica only with no errant
    // transactions.
    let mut world = World::bootstrapped();
    world.kill("iad");
    world.run_polls(10);
    assert_eq!(world.memory.active_site, "pdx");
    world.restart("iad");
    world.run_polls(3);
    assert_eq!(world.memory.site("iad").unwrap().state, SiteState::Replica);
    assert_eq!(world.site("iad").source.as_deref(), Some("pdx"));
    assert!(!world.taints.contains("node-iad"));
    let record = world.memory.last_failover.clone().unwrap();
    assert!(record.exact);
    assert_eq!(record.lost_transactions, 0);
}

#[test]
fn primary_reassertion_after_mysqld_restart_without_failover() {
    // docs/design/operator.md#primary-reassertion: authority re-issued, writable again without
    // a failover.
    let mut world = World::bootstrapped();
    world.poll();
    // mysqld restarts between polls and comes back read-only; the sidecar keeps its cache.
    world.site_mut("iad").mysqld_started_at = world.now + Duration::from_secs(1);
    world.site_mut("iad").lease_until = None;
    world.site_mut("iad").read_only = true;
    world.advance(Duration::from_secs(2));
    world.site_mut("iad").read_only = true;
    world.site_mut("iad").lease_until = None;
    world.poll();
    world.run_polls(2);
    assert_eq!(world.events_of(EventReason::PrimaryReasserted).len(), 1);
    assert_eq!(world.memory.active_site, "iad");
    assert_eq!(world.memory.topology_generation, 1, "no failover");
    assert!(world.memory.authority.is_valid());
    assert!(world.memory.emergency_failover.is_none());
}

#[test]
fn cooldown_gates_emergency_failover() {
    // docs/design/requirements.md R001.10 / docs/design/operator.md#cooldown: the anti-flap
    // cooldown gates emergency failover too.
    let mut world = World::bootstrapped();
    world.kill("iad");
    world.run_polls(10);
    assert_eq!(world.memory.active_site, "pdx");
    world.restart("iad");
    world.run_polls(3);
    assert_eq!(world.memory.site("iad").unwrap().state, SiteState::Replica);
    // pdx dies inside the 30 s cooldown: no failover.
    world.kill("pdx");
    world.run_polls(4);
    assert_eq!(world.memory.active_site, "pdx");
    assert_eq!(
        world
            .events_of(EventReason::EmergencyFailoverBlockedByCooldown)
            .len(),
        1
    );
    assert!(world.memory.emergency_failover.is_none());
    // After the cooldown the failover proceeds.
    world.run_polls(20);
    assert_eq!(world.memory.active_site, "iad");
}

#[test]
fn cooldown_in_force_when_only_one_copy_survives() {
    // docs/design/requirements.md R001.10: the cooldown is persisted twice (status and
    // annotation); either copy alone keeps it in force.
    for lose_status in [true, false] {
        let mut world = World::bootstrapped();
        world.kill("iad");
        world.run_polls(10);
        world.restart("iad");
        world.run_polls(3);
        if lose_status {
            world.memory.cooldown_until = None;
        } else {
            world.annotations.cooldown_until = None;
        }
        world.kill("pdx");
        world.run_polls(4);
        assert_eq!(
            world.memory.active_site, "pdx",
            "one copy (lose_status={lose_status}) still gates"
        );
    }
}

#[test]
fn cooldown_violated_restart_state_lost_is_possible_when_every_copy_is_lost() {
    // Inherent finding CooldownViolated(restart+stateLost): both persisted copies of the
    // cooldown lost across a restart; the engine cannot know and promotes inside it.
    let mut world = World::bootstrapped();
    world.kill("iad");
    world.run_polls(10);
    world.restart("iad");
    world.run_polls(3);
    let generation = world.memory.topology_generation;
    world.memory.cooldown_until = None;
    world.annotations.cooldown_until = None;
    world.kill("pdx");
    world.run_polls(12);
    assert_eq!(
        world.memory.active_site, "iad",
        "the engine cannot know: it promotes inside the cooldown"
    );
    assert!(world.memory.topology_generation > generation);
}

#[test]
fn seed_003_hold_is_never_consulted_by_emergency_failover() {
    let mut world = World::bootstrapped();
    world.hold = Some(HoldInfo {
        earliest_expiry: world.now + Duration::from_secs(120),
        operation_id: "a1c3f0e2".to_string(),
        instance: "counter-app".to_string(),
    });
    world.kill("iad");
    world.run_polls(10);
    assert_eq!(world.memory.active_site, "pdx");
    assert!(world
        .revocations
        .contains(&(RevokeReason::TopologyChanged, 2)));
}

#[test]
fn seed_003_revoke_annotation_revokes_every_lease_with_operator_revoked() {
    let mut world = World::bootstrapped();
    world.annotations.revoke_deployment_leases = true;
    let decision = world.poll();
    assert!(decision.actions.contains(&Action::RevokeDeployLeases {
        reason: RevokeReason::OperatorRevoked,
        topology_generation: 1
    }));
    assert!(decision.actions.contains(&Action::Annotate(
        AnnotationChange::ClearRevokeDeploymentLeases
    )));
    assert!(!world.annotations.revoke_deployment_leases);
    assert_eq!(
        world.memory.topology_generation, 1,
        "revoking changes no topology"
    );
}

#[test]
fn cooldown_starts_at_promotion_in_both_copies() {
    // docs/design/requirements.md R001.10: the cooldown starts at every promotion and is
    // persisted in status and the cooldown-until annotation.
    let mut world = World::bootstrapped();
    world.kill("iad");
    world.run_polls(10);
    let promoted = promoted_at(&world).unwrap();
    let expected = promoted + world.spec.failover_cooldown.get();
    assert_eq!(world.memory.cooldown_until, Some(expected));
    assert_eq!(world.annotations.cooldown_until, Some(expected));
}

#[test]
fn status_write_lost_after_promotion_is_recovered_from_the_sidecars() {
    // docs/design/requirements.md R001.15: an error from a mutation is an unknown, re-read -- a
    // lost status write is re-read from the sidecars.
    let mut world = World::bootstrapped();
    world.kill("iad");
    world.run_polls(10);
    assert_eq!(world.memory.active_site, "pdx");
    // The operator restarts with the status of before the failover.
    let stale = World::bootstrapped().memory;
    world.memory = stale;
    world.run_polls(2);
    assert_eq!(world.memory.active_site, "pdx");
    assert_eq!(world.memory.topology_generation, 2);
    assert!(world.memory.authority.is_valid());
    assert_eq!(world.events_of(EventReason::AuthorityAdopted).len(), 1);
}

#[test]
fn status_lost_entirely_recovers_topology_and_cooldown_from_the_sidecars_cached_authority() {
    // The sidecars are a third copy of the promotion time (Authority.issuedAt): an operator
    // restarted with no status at all adopts their authority and the cooldown it implies.
    let mut world = World::bootstrapped();
    world.kill("iad");
    world.run_polls(10);
    world.restart("iad");
    world.run_polls(3);
    let expected_cooldown = world.memory.cooldown_until;
    world.memory = bloodraven_core::GroupMemory::initial(&world.spec);
    world.annotations.cooldown_until = None;
    world.poll();
    assert_eq!(world.memory.active_site, "pdx");
    assert_eq!(world.memory.topology_generation, 2);
    assert_eq!(world.memory.cooldown_until, expected_cooldown);
    world.kill("pdx");
    world.run_polls(4);
    assert_eq!(
        world.memory.active_site, "pdx",
        "still inside the recovered cooldown"
    );
}

#[test]
fn old_primary_returning_while_no_candidate_remains_gets_the_authority_back() {
    // iad dies, the move is announced, then pdx dies too: nothing to promote. When iad
    // returns (read-only, startup safety net) it is the last resort and is re-promoted
    // under the move's generation instead of leaving the group without a writable site.
    let mut world = World::bootstrapped();
    world.kill("iad");
    world.run_polls(3);
    assert!(world.memory.emergency_failover.is_some());
    world.kill("pdx");
    world.run_polls(6);
    assert_eq!(world.memory.topology_generation, 1, "nothing promoted yet");
    world.restart("iad");
    world.run_polls(5);
    assert_eq!(world.memory.active_site, "iad");
    assert_eq!(world.memory.topology_generation, 2);
    assert_eq!(world.writable_sites(), vec!["iad".to_string()]);
    assert!(world.memory.authority.is_valid());
    assert!(
        !world.taints.contains("node-iad"),
        "untainted when it became active again"
    );
    assert!(world.split_brain_at.is_empty());
}

#[test]
fn seed_001_cooldown_copy_lost_alone_is_rewritten_from_the_surviving_one() {
    // docs/design/requirements.md R001.10: the cooldown is persisted twice, so only when both
    // writes are lost across a restart can a restarted operator promote early. A copy lost on
    // its own is healed while the cooldown runs, so two separate losses never add up to
    // CooldownViolated(restart+stateLost).
    let mut world = World::bootstrapped();
    world.kill("iad");
    world.run_polls(10);
    let expected = world.memory.cooldown_until.expect("cooldown started");
    world.annotations.cooldown_until = None;
    world.run_polls(1);
    assert_eq!(
        world.annotations.cooldown_until,
        Some(expected),
        "annotation copy rewritten"
    );
    world.memory.cooldown_until = None;
    world.run_polls(1);
    assert_eq!(
        world.memory.cooldown_until,
        Some(expected),
        "status copy restored"
    );
    // Both copies now survive a later single loss.
    world.annotations.cooldown_until = None;
    world.memory.cooldown_until = Some(expected);
    world.run_polls(1);
    assert_eq!(world.annotations.cooldown_until, Some(expected));
}

#[test]
fn transactions_only_a_direct_replica_received_are_fetched_not_lost() {
    // docs/design/operator.md#emergency-failover: lostTransactions is what the new primary
    // lacks of the old one's history. Transactions the reader received from iad after pdx
    // stopped receiving are known to exist: pdx fetches them from the reader before it is
    // promoted (it used to be promoted without them: 3 lost, and the reader left with 3 errant
    // transactions).
    let mut world = World::bootstrapped();
    world.site_mut("pdx").peer_cut = true;
    world.poll();
    for _ in 0..3 {
        assert!(world.write("iad"));
    }
    world.advance(crate::support::TICK);
    assert!(world.site("reader").gtid.count() > world.site("pdx").gtid.count());
    world.kill("iad");
    world.site_mut("pdx").peer_cut = false;
    world.run_polls_until_active("pdx", 20);
    world.run_polls(2);
    let record = world.memory.last_failover.clone().unwrap();
    assert!(record.completed_at.is_some());
    assert!(!record.exact);
    assert_eq!(record.lost_transactions, 0, "{record:?}");
    world.restart("iad");
    world.run_polls(2);
    let record = world.memory.last_failover.clone().unwrap();
    assert!(record.exact);
    assert_eq!(record.lost_transactions, 0);
}

fn condition(world: &World, type_: &str) -> (String, String) {
    let status = world.memory.to_status();
    let condition = status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("condition {type_} in status"));
    (condition.status.clone(), condition.reason.clone())
}

#[test]
fn bloodraven_md_status_conditions_follow_an_emergency_failover() {
    use bloodraven_core::engine::{
        unstable_reason, UnstableReason, CONDITION_DEGRADED, CONDITION_FAILOVER_IN_PROGRESS,
        CONDITION_READY, CONDITION_STABLE,
    };
    let mut world = World::bootstrapped();
    world.run_polls(1);
    assert_eq!(
        condition(&world, CONDITION_READY),
        ("True".into(), "AuthorityValid".into())
    );
    assert_eq!(condition(&world, CONDITION_STABLE).0, "True");
    assert_eq!(unstable_reason(&world.memory), None);
    let ready_since = world.memory.to_status().conditions[0].last_transition_time;
    world.run_polls(2);
    assert_eq!(
        world.memory.to_status().conditions[0].last_transition_time,
        ready_since,
        "unchanged status keeps its lastTransitionTime"
    );
    world.kill("iad");
    world.run_polls(3);
    assert_eq!(
        condition(&world, CONDITION_FAILOVER_IN_PROGRESS),
        ("True".into(), "EmergencyFailover".into())
    );
    assert_eq!(
        condition(&world, CONDITION_READY),
        ("False".into(), "Moving".into())
    );
    assert_eq!(
        unstable_reason(&world.memory),
        Some(UnstableReason::RecoveryPending),
        "seed 003: recovery pending is unstable"
    );
    world.run_polls(10);
    assert_eq!(world.memory.active_site, "pdx");
    assert_eq!(condition(&world, CONDITION_READY).0, "True");
    assert_eq!(condition(&world, CONDITION_FAILOVER_IN_PROGRESS).0, "False");
    assert_eq!(
        condition(&world, CONDITION_DEGRADED),
        ("True".into(), "SitesUnreachable".into())
    );
    assert_eq!(
        unstable_reason(&world.memory),
        Some(UnstableReason::Degraded)
    );
    // Persisted and read back: conditions keep their times across a restart.
    let status = world.memory.to_status();
    let restored = bloodraven_core::GroupMemory::from_status(&world.spec, Some(&status), world.now);
    assert_eq!(restored.conditions, status.conditions);
}

#[test]
fn a_promoted_site_dying_before_it_is_confirmed_writable_is_failed_over_after_the_cooldown() {
    // docs/design/operator.md#emergency-failover: emergency failover for a failed active site;
    // the cooldown gates it. A new active site that dies in the poll after its promotion (never
    // confirmed writable) must not leave the engine waiting for a confirmation that cannot
    // come.
    let mut spec = crate::support::playground_spec();
    spec.sites.insert(
        2,
        bloodraven_api::SiteSpec {
            name: "sea".to_string(),
            role: bloodraven_api::SiteRole::ReadWrite,
            read_only_max_lag_seconds: None,
            node_selector: Default::default(),
        },
    );
    let mut world = World::with_spec(spec);
    world.poll();
    world.run_polls(3);
    assert!(world.memory.authority.is_valid());
    world.kill("iad");
    let mut polls = 0;
    while world.memory.topology_generation < 2 && polls < 20 {
        world.run_polls(1);
        polls += 1;
    }
    let promoted = world.memory.active_site.clone();
    assert_ne!(promoted, "iad");
    assert!(world
        .memory
        .last_failover
        .as_ref()
        .unwrap()
        .completed_at
        .is_none());
    world.kill(&promoted);
    // The old primary's pod returns (read-only, fenced), so a majority of the four sidecars
    // can vote on the lease wait.
    world.restart("iad");
    world.run_polls(40);
    assert_eq!(
        world.memory.topology_generation, 3,
        "the dead new active site was failed over once the cooldown ended"
    );
    let survivor = if promoted == "pdx" { "sea" } else { "pdx" };
    assert_eq!(world.memory.active_site, survivor);
    assert_eq!(world.writable_sites(), vec![survivor.to_string()]);
    assert!(world.split_brain_at.is_empty());
}

#[test]
fn an_active_site_edited_to_read_only_loses_the_authority_through_the_lease_wait() {
    // docs/design/operator.md#emergency-failover / docs/design/requirements.md R000.17: a
    // read-only site is never writable. A spec edit that makes the active site read-only moves
    // the authority to a read-write site the safe way (move notice, lease wait), and the now
    // read-only site's node is never tainted.
    let mut world = World::bootstrapped();
    world.spec.sites[0].role = bloodraven_api::SiteRole::ReadOnly;
    // validate(): the initial active site must stay read-write.
    world.spec.initial_active_site = "pdx".to_string();
    world.run_polls_until_active("pdx", 20);
    world.run_polls(3);
    assert_eq!(world.writable_sites(), vec!["pdx".to_string()]);
    assert!(world.split_brain_at.is_empty());
    assert!(world.taints.is_empty(), "{:?}", world.taints);
}

#[test]
fn polls_follow_up_while_a_failover_is_in_flight_and_the_outage_shrinks() {
    // docs/design/operator.md#authority-sidecars-and-fencing: "write outage ~ detection floor +
    // margin + promotion". At the spec's rhythm each phase after detection (fence, promote,
    // confirm) waits a whole interval.
    use bloodraven_core::engine::{next_poll_in, AuthorityValidity, FOLLOW_UP_WINDOW};
    let mut world = World::bootstrapped();
    let interval = world.spec.poll_interval.get();
    assert_eq!(
        next_poll_in(&world.spec, &world.memory, world.now),
        interval
    );
    world.kill("iad");
    let killed_at = world.now;
    while world.memory.emergency_failover.is_none() {
        world.run_polls(1);
        assert!(world.now.saturating_duration_since(killed_at) < Duration::from_secs(20));
    }
    let follow_up = next_poll_in(&world.spec, &world.memory, world.now);
    assert_eq!(follow_up, Duration::from_millis(250));
    while !(world.memory.active_site == "pdx"
        && matches!(world.memory.authority, AuthorityValidity::Valid))
    {
        let next = next_poll_in(&world.spec, &world.memory, world.now);
        world.advance(next);
        world.poll();
        assert!(world.now.saturating_duration_since(killed_at) < Duration::from_secs(20));
    }
    let outage = world.now.saturating_duration_since(killed_at);
    let floor = world.spec.detection_floor();
    let lease = world.spec.effective_write_lease() + CLOCK_DRIFT_MARGIN;
    // Fenced once the last grant (at or before the kill) is older than the lease + margin;
    // promotion and confirmation then take follow-ups, not intervals.
    assert!(outage >= floor.max(lease), "{outage:?}");
    assert!(outage <= lease + Duration::from_secs(1), "{outage:?}");
    // Over: the spec's rhythm again.
    assert_eq!(
        next_poll_in(&world.spec, &world.memory, world.now),
        interval
    );
    // A failover stuck in flight follows up only within the window.
    let mut stuck = world.memory.clone();
    stuck.emergency_failover = Some(bloodraven_core::engine::EmergencyFailover {
        from: "pdx".into(),
        phase: EmergencyPhase::AwaitingLeaseExpiry,
        announced_at: world.now,
        started_at: world.now,
        detected_at: world.now,
        fenced_at: None,
        holder_unknown: false,
    });
    assert_eq!(next_poll_in(&world.spec, &stuck, world.now), follow_up);
    assert_eq!(
        next_poll_in(&world.spec, &stuck, world.now + FOLLOW_UP_WINDOW),
        interval
    );
}

/// The failover of iad after `break_iad`, run at the spec's rhythm: (detected, fenced).
fn detected_and_fenced(break_iad: impl FnOnce(&mut World)) -> (Duration, Duration) {
    let mut world = World::bootstrapped();
    let broken_at = world.now;
    break_iad(&mut world);
    for _ in 0..20 {
        world.run_polls(1);
        if promoted_at(&world).is_some() {
            break;
        }
    }
    let failover = world.memory.last_failover.clone().expect("a failover");
    let since = |at: Option<bloodraven_core::time::Timestamp>| {
        at.expect("timestamp").saturating_duration_since(broken_at)
    };
    (since(failover.detected_at), since(failover.fenced_at))
}

// docs/design/history.md#issue-10-case-1: "MySQL down" is not proof. A refused connection (nothing
// listens: mysqld is not running) lets the operator skip the lease wait; an error reading a live
// mysqld (access denied here; a frozen one times out) is unknown, and the operator waits until a
// majority stopped granting iad a lease.
#[test]
fn only_a_refused_mysqld_skips_the_lease_wait_an_unreadable_one_does_not() {
    let spec = World::bootstrapped().spec;
    let (lease, interval) = (spec.effective_write_lease(), spec.poll_interval.get());
    let (detected, fenced) = detected_and_fenced(|world| world.site_mut("iad").mysql_up = false);
    assert!(
        fenced <= detected + interval,
        "refused: confirmed down at the poll after detection: detected {detected:?}, fenced {fenced:?}"
    );
    let (detected, fenced) =
        detected_and_fenced(|world| world.site_mut("iad").mysql_unreadable = true);
    assert!(
        fenced.saturating_sub(detected) >= lease,
        "unreadable: the lease wait ({lease:?}) is not skipped: detected {detected:?}, fenced {fenced:?}"
    );
}

#[test]
fn a_partitioned_active_site_is_detected_at_the_threshold_th_failed_poll() {
    // s026/s023 on localkube detected a partitioned iad at the 4th failed poll (7.5 s).
    let mut world = World::bootstrapped();
    world.site_mut("iad").operator_cut = true;
    world.site_mut("iad").peer_cut = true;
    world.run_polls(3);
    assert_eq!(
        world.memory.site("iad").unwrap().detection,
        Detection::Failed,
        "{:?}",
        world.memory.site("iad").unwrap()
    );
}

#[test]
fn a_first_failed_read_that_took_its_timeout_does_not_delay_detection() {
    // s026 on localkube: the first read of the partitioned iad timed out (its answer came a
    // round-trip budget late), the later ones were refused at once. Timed on when each poll
    // ended, the streak fell short at the 3rd failed poll and detection took a 4th (7.4 s).
    // Streaks are timed on when the poll read.
    let mut world = World::bootstrapped();
    world.site_mut("iad").operator_cut = true;
    world.site_mut("iad").peer_cut = true;
    // Poll 1 read at t, decided at t + 666 ms (the read timed out); polls 2 and 3 at once.
    world.advance(Duration::from_secs(2));
    world.polled_at = Some(world.now);
    world.advance(Duration::from_millis(666));
    world.poll();
    for _ in 0..2 {
        world.advance(Duration::from_millis(2_000 - 666));
        world.polled_at = Some(world.now);
        world.poll();
        world.advance(Duration::from_millis(666));
    }
    assert_eq!(
        world.memory.site("iad").unwrap().detection,
        Detection::Failed,
        "{:?}",
        world.memory.site("iad").unwrap()
    );
}

#[test]
fn primary_reassertion_is_seen_by_an_operator_that_restarted_during_the_outage() {
    // docs/design/requirements.md R001.5 / scenario 012: the active site's mysqld restarts
    // while the operator is away; the operator that comes back (memory from status) still tells
    // a restart from the run it last saw, and reasserts with the event (it never did: the start
    // was not persisted).
    let mut world = World::bootstrapped();
    world.poll();
    let status = world.memory.to_status();
    world.advance(Duration::from_secs(10));
    world.site_mut("iad").mysqld_started_at = world.now;
    world.site_mut("iad").lease_until = None;
    world.site_mut("iad").read_only = true;
    world.advance(Duration::from_secs(5));
    world.memory =
        bloodraven_core::engine::GroupMemory::from_status(&world.spec, Some(&status), world.now);
    world.poll();
    world.run_polls(2);
    assert_eq!(world.events_of(EventReason::PrimaryReasserted).len(), 1);
    assert_eq!(world.memory.topology_generation, 1, "no failover");
    assert!(world.memory.authority.is_valid());
}

#[test]
fn candidate_behind_the_reader_catches_up_from_it_before_it_is_promoted() {
    // s028 on the playground: frozen mid-commit, iad had shipped its last transaction to the
    // reader and not to pdx. Promoting pdx as it was left the reader with a transaction the
    // new primary lacks (errant: fenced for good, and a write dropped from the new history).
    let mut world = World::bootstrapped();
    for _ in 0..5 {
        assert!(world.write("iad"));
    }
    world.advance(Duration::from_secs(1));
    world.site_mut("pdx").running = false;
    assert!(world.write("iad"));
    world.advance(Duration::from_secs(1));
    let reader_gtid = world.site("reader").gtid.clone();
    assert_ne!(world.site("pdx").gtid, reader_gtid, "pdx is one behind");
    world.kill("iad");
    world.run_polls_until_active("pdx", 20);
    let actions: Vec<&Action> = world
        .decisions
        .iter()
        .flat_map(|(_, decision)| &decision.actions)
        .collect();
    let repointed = actions.iter().position(|action| {
        matches!(action, Action::Repoint { site, request } if site == "pdx" && request.source_host.contains("-reader"))
    });
    let promoted = actions
        .iter()
        .position(|action| matches!(action, Action::Promote { site, .. } if site == "pdx"));
    assert!(
        repointed.is_some() && repointed < promoted,
        "pdx replicates from the reader before it drains: {repointed:?} {promoted:?}"
    );
    // The catch-up keeps what pdx already received from iad: a repoint's CHANGE MASTER
    // deletes the relay log, and what pdx received and had not applied may be on no other
    // site (s043 through the fault agent: 97 acknowledged writes lost that way).
    let catch_up_drains = repointed.is_some_and(|index| {
        matches!(actions[index], Action::Repoint { request, .. } if request.drain_received_ms.is_some_and(|ms| ms > 0))
    });
    assert!(
        catch_up_drains,
        "the catch-up repoint applies pdx's relay log first: {:?}",
        repointed.map(|index| actions[index])
    );
    assert!(!world.events_of(EventReason::CatchingUp).is_empty());
    assert!(
        world.site("pdx").gtid.contains(&reader_gtid),
        "pdx holds everything the reader has"
    );
    world.run_polls(3);
    let record = world.memory.last_failover.clone().unwrap();
    assert_eq!(record.lost_transactions, 0, "{record:?}");
    assert_eq!(world.site("reader").source.as_deref(), Some("pdx"));
    assert!(world
        .memory
        .site("reader")
        .and_then(|site| site.errant.clone())
        .is_none_or(|errant| errant.is_empty()));
    assert!(world.split_brain_at.is_empty());
}

/// iad's mysqld freezes writable and its sidecar dies at the same moment
/// (docs/design/history.md#issue-10-the-agentless-primary): nothing in the pod can fence it.
fn agentless_freeze(world: &mut World) {
    for _ in 0..5 {
        assert!(world.write("iad"));
    }
    world.advance(Duration::from_secs(1));
    world.freeze("iad", true);
    world.site_mut("iad").sidecar_alive = false;
    world.site_mut("iad").lease_until = None;
}

fn deletes_of(world: &World, site: &str) -> Vec<(usize, String)> {
    world
        .decisions
        .iter()
        .enumerate()
        .flat_map(|(index, (_, decision))| {
            decision
                .actions
                .iter()
                .filter_map(move |action| match action {
                    Action::DeletePod {
                        site: target, uid, ..
                    } if target == site => Some((index, uid.clone())),
                    _ => None,
                })
        })
        .collect()
}

fn first_promotion(world: &World, site: &str) -> Option<usize> {
    world.decisions.iter().position(|(_, decision)| {
        decision
            .actions
            .iter()
            .any(|action| matches!(action, Action::Promote { site: target, .. } if target == site))
    })
}

#[test]
fn a_frozen_primary_whose_sidecar_died_is_killed_by_its_kubelet_before_the_promotion() {
    let mut world = World::bootstrapped();
    agentless_freeze(&mut world);
    world.run_polls_until_active("pdx", 20);
    let deletes = deletes_of(&world, "iad");
    assert!(
        !deletes.is_empty(),
        "the agentless old primary was not deleted"
    );
    assert!(deletes.iter().all(|(_, uid)| uid == "iad-0"), "{deletes:?}");
    assert_eq!(world.site("iad").pods_deleted, vec!["iad-0".to_string()]);
    let promoted = first_promotion(&world, "pdx").expect("pdx promoted");
    assert!(
        deletes[0].0 < promoted,
        "the kill was asked for at poll {}, after the promotion at {promoted}",
        deletes[0].0
    );
    assert_eq!(
        world.events_of(EventReason::AgentlessPrimaryKilled).len(),
        1
    );
    world.run_polls(3);
    // The recreated pod is left alone: its sidecar started without authority.
    assert_eq!(world.site("iad").pods_deleted.len(), 1);
    assert!(
        world.split_brain_at.is_empty(),
        "{:?}",
        world.split_brain_at
    );
    assert_eq!(world.writable_sites(), vec!["pdx".to_string()]);
}

#[test]
fn a_node_that_cannot_be_read_while_the_old_pod_terminates_does_not_release_the_promotion() {
    // s029 live (a125cc9): the agentless old primary's pod was deleted (grace 1 s) and pdx was
    // promoted 250 ms later, while the frozen mysqld still lived with its SIGTERM pending; the
    // thaw after the promotion then let it acknowledge the held write. A node whose `Ready`
    // could not be read this poll (a read that failed or outran the poll's budget) is no proof
    // that nobody can carry the kill out: the promotion still waits for the pod to go.
    let mut world = World::bootstrapped();
    agentless_freeze_until_terminating(&mut world);
    world.site_mut("iad").node_unreadable = true;
    // 15 s: past the lease wait (7 s), within the kill's patience (30 s past it).
    for _ in 0..60 {
        world.poll();
        world.advance(Duration::from_millis(250));
    }
    assert_eq!(
        first_promotion(&world, "pdx"),
        None,
        "promoted while the old pod, mysqld running, was still terminating"
    );
    // The kubelet finishes: the pod goes, and the promotion follows.
    world.site_mut("iad").node_unreadable = false;
    world.site_mut("iad").deletion_lingers = false;
    world.site_mut("iad").terminating = false;
    world.site_mut("iad").pods_deleted.push("iad-0".to_string());
    world.recreate_pod("iad");
    world.run_polls_until_active("pdx", 20);
    assert!(
        world.split_brain_at.is_empty(),
        "{:?}",
        world.split_brain_at
    );
}

/// The double fault with the old pod's deletion lingering: polls until the kill was asked for.
fn agentless_freeze_until_terminating(world: &mut World) {
    world.site_mut("iad").deletion_lingers = true;
    agentless_freeze(world);
    for _ in 0..40 {
        world.poll();
        world.advance(Duration::from_millis(250));
        if world.site("iad").terminating {
            break;
        }
    }
    assert!(
        world.site("iad").terminating,
        "the kill was never asked for"
    );
}

/// iad's kubelet starts its sidecar again: it answers the operator, not yet probed (ready
/// false); then 15 s of polls.
fn sidecar_started_again_for_15s(world: &mut World) {
    world.site_mut("iad").sidecar_alive = true;
    world.site_mut("iad").kubelet_sidecar_ready = Some(false);
    for _ in 0..60 {
        world.poll();
        world.advance(Duration::from_millis(250));
    }
}

#[test]
fn a_sidecar_started_again_in_the_terminating_old_pod_does_not_release_the_promotion() {
    // s029 through the fault agent (9ec1fe0 live): the agent killed iad's sidecar and kept it
    // down by killing it again whenever its kubelet started it; one such start answered the
    // operator's poll 280 ms into the deleted pod's grace period, and pdx was promoted while
    // the frozen mysqld still lived. The thaw then let it acknowledge the held write.
    let mut world = World::bootstrapped();
    agentless_freeze_until_terminating(&mut world);
    sidecar_started_again_for_15s(&mut world);
    assert_eq!(
        first_promotion(&world, "pdx"),
        None,
        "promoted while the old pod, its mysqld frozen, was still terminating"
    );
    world.site_mut("iad").sidecar_alive = false;
    world.site_mut("iad").kubelet_sidecar_ready = None;
    world.site_mut("iad").deletion_lingers = false;
    world.site_mut("iad").terminating = false;
    world.site_mut("iad").pods_deleted.push("iad-0".to_string());
    world.recreate_pod("iad");
    world.run_polls_until_active("pdx", 20);
    assert!(
        world.split_brain_at.is_empty(),
        "{:?}",
        world.split_brain_at
    );
}

#[test]
fn a_sidecar_its_kubelet_does_not_call_ready_is_no_agent_even_when_it_answers() {
    // The same start seen before the kill was asked for: a sidecar that answers once, which its
    // kubelet has not yet probed, may be killed again the next moment and fences nothing; the
    // old pod is deleted and the promotion waits for it to go.
    let mut world = World::bootstrapped();
    world.site_mut("iad").deletion_lingers = true;
    agentless_freeze(&mut world);
    // Its reads of the frozen mysqld time out.
    world.site_mut("iad").mysql_unreadable = true;
    sidecar_started_again_for_15s(&mut world);
    assert!(
        !deletes_of(&world, "iad").is_empty(),
        "the old pod was not deleted"
    );
    assert_eq!(first_promotion(&world, "pdx"), None);
}

#[test]
fn without_the_agentless_kill_the_frozen_primary_is_split_brain() {
    // The same double fault with the rule switched off (the rule before the agentless kill,
    // docs/design/history.md#issue-10-the-agentless-primary): the lease lapses, pdx is
    // promoted, and iad's frozen mysqld is still writable.
    let mut world = World::bootstrapped();
    world.options.unsafe_skip_agentless_kill = true;
    agentless_freeze(&mut world);
    world.run_polls_until_active("pdx", 20);
    world.run_polls(2);
    assert!(deletes_of(&world, "iad").is_empty());
    assert!(!world.split_brain_at.is_empty(), "the world must see it");
}

#[test]
fn an_agentless_primary_on_a_node_that_is_not_ready_fails_over_on_the_lease() {
    // Nobody can carry a deletion out: the rule does not hold the failover (mysqld is not
    // frozen here, so the write deadline fenced it; this world fences a site without a
    // sidecar at once).
    let mut world = World::bootstrapped();
    world.site_mut("iad").kubelet_up = false;
    world.site_mut("iad").sidecar_alive = false;
    world.run_polls_until_active("pdx", 20);
    assert!(deletes_of(&world, "iad").is_empty());
    assert!(world.split_brain_at.is_empty());
}

#[test]
fn a_partitioned_primary_whose_sidecar_is_ready_is_not_killed() {
    // The kubelet's probe is local: a partitioned sidecar is ready, alive, and fences mysqld
    // itself within the lease. The established connection of docs/design/requirements.md
    // R000.20 gets 1290, not a reset.
    let mut world = World::bootstrapped();
    world.site_mut("iad").operator_cut = true;
    world.site_mut("iad").peer_cut = true;
    world.run_polls_until_active("pdx", 20);
    assert!(deletes_of(&world, "iad").is_empty());
    assert!(world
        .events_of(EventReason::AgentlessPrimaryKilled)
        .is_empty());
    assert!(world.site("iad").mysql_up && world.site("iad").read_only);
}

#[test]
fn a_crashed_mysqld_is_not_killed_again() {
    // The whole pod died: the kubelet reports mysql not running, so there is nothing to kill.
    let mut world = World::bootstrapped();
    world.kill("iad");
    world.run_polls_until_active("pdx", 20);
    assert!(deletes_of(&world, "iad").is_empty());
}

#[test]
fn a_deletion_that_never_happens_holds_the_promotion_only_for_the_patience() {
    // pods/delete denied: the promotion waits AGENTLESS_KILL_PATIENCE past the lease wait
    // bound, then goes ahead on the lease and says so.
    let mut world = World::bootstrapped();
    world.pod_deletes_denied = true;
    agentless_freeze(&mut world);
    world.run_polls_until_active("pdx", 40);
    let failover = world.memory.last_failover.clone().expect("failed over");
    let promoted = failover.promoted_at.expect("promoted");
    let waited = promoted.saturating_duration_since(failover.detected_at.expect("detected"));
    assert!(
        waited >= AGENTLESS_KILL_PATIENCE,
        "promoted {waited:?} after detection"
    );
    assert!(!world
        .events_of(EventReason::AgentlessPrimaryNotKilled)
        .is_empty());
    assert!(world.site("iad").pods_deleted.is_empty());
}

#[test]
fn a_silent_sidecar_its_kubelet_still_calls_ready_holds_the_promotion_for_the_probe_window() {
    // A partitioned sidecar and a hung one both stop answering; the kubelet tells them apart
    // only once the readiness probe failed three times. Until then the promotion waits, even
    // with the lease over.
    let mut world = World::bootstrapped();
    world.site_mut("iad").operator_cut = true;
    world.site_mut("iad").peer_cut = true;
    let cut_at = world.now;
    world.run_polls_until_active("pdx", 30);
    let promoted = promoted_at(&world).expect("promoted");
    assert!(
        promoted.saturating_duration_since(cut_at) >= SIDECAR_NOT_READY_WITHIN,
        "promoted {:?} after the sidecar went silent",
        promoted.saturating_duration_since(cut_at)
    );
    assert!(
        deletes_of(&world, "iad").is_empty(),
        "a live sidecar's pod is never deleted"
    );
    assert!(world
        .events_of(EventReason::AwaitingLeaseExpiry)
        .iter()
        .any(|event| event.message.contains("readiness probe")));
}

#[test]
fn a_hang_that_shows_at_the_kubelet_within_the_probe_window_is_killed_before_the_promotion() {
    // mysqld frozen writable, its sidecar silent; its kubelet reports it ready for 5 s (the
    // probe window), then not ready: the kill comes before the promotion.
    let mut world = World::bootstrapped();
    for _ in 0..5 {
        assert!(world.write("iad"));
    }
    world.freeze("iad", true);
    world.site_mut("iad").operator_cut = true;
    world.site_mut("iad").peer_cut = true;
    world.advance(Duration::from_secs(5));
    world.site_mut("iad").sidecar_alive = false;
    world.run_polls_until_active("pdx", 30);
    let deletes = deletes_of(&world, "iad");
    let promoted = first_promotion(&world, "pdx").expect("promoted");
    assert!(
        !deletes.is_empty() && deletes[0].0 < promoted,
        "{deletes:?}, promoted at {promoted}"
    );
    world.run_polls(3);
    assert!(
        world.split_brain_at.is_empty(),
        "{:?}",
        world.split_brain_at
    );
}

#[test]
fn an_emergency_failover_back_to_the_old_site_never_deletes_the_pod_it_promotes() {
    // Simulator seed 489 (`--all-faults --restore --image-update`): iad fails, pdx is lost
    // while it catches up, and iad, back read-only, is promoted as the last resort (the
    // move's target is its own old site). Before the promotion is confirmed (iad cannot reach
    // its peers for a lease), iad's sidecar dies. The agentless rule is for an old primary
    // another site is promoted over; here it deleted the very pod the same decision pushed
    // the authority to (plan's assertion "pod of iad deleted in the decision that pushes an
    // authority naming it" fired inside decide).
    let mut world = World::bootstrapped();
    world.kill("iad");
    world.run_polls(3);
    assert!(world.memory.emergency_failover.is_some());
    world.kill("pdx");
    world.run_polls(6);
    world.restart("iad");
    world.site_mut("iad").peer_cut = true;
    let mut promoting = false;
    for _ in 0..8 {
        world.run_polls(1);
        promoting = matches!(
            world.memory.emergency_failover.as_ref().map(|f| &f.phase),
            Some(EmergencyPhase::Promoting { to }) if to == "iad"
        );
        if promoting {
            break;
        }
    }
    assert!(promoting, "iad was not promoted back as the last resort");
    assert_eq!(world.memory.active_site, "iad");
    // Its sidecar dies; mysqld keeps running, the kubelet reports the sidecar not ready.
    world.site_mut("iad").sidecar_alive = false;
    world.site_mut("iad").lease_until = None;
    world.run_polls(3);
    assert!(
        deletes_of(&world, "iad").is_empty(),
        "the pod of the site being promoted was deleted: {:?}",
        deletes_of(&world, "iad")
    );
    assert!(world
        .events_of(EventReason::AgentlessPrimaryKilled)
        .is_empty());
    assert!(world.split_brain_at.is_empty());
}

#[test]
fn polls_follow_up_while_an_issued_authority_is_invalid_and_the_shed_primary_returns_sooner() {
    // Scenario 041: mysqld's write deadline, run early by a clock stepped forward, fences the
    // healthy primary for under a second. A poll that lands in that fence reads iad read-only
    // and sheds both shared Services; at the spec's rhythm they came back a whole interval
    // later (a 3.07 s write gap on the playground). Following up, a quarter second later.
    use bloodraven_core::engine::{next_poll_in, AuthorityValidity, FOLLOW_UP_WINDOW};
    let mut world = World::bootstrapped();
    let interval = world.spec.poll_interval.get();
    assert_eq!(world.memory.authority_invalid_since, None);
    assert_eq!(
        next_poll_in(&world.spec, &world.memory, world.now),
        interval
    );
    world.site_mut("iad").read_only = true;
    world.poll();
    assert!(
        matches!(world.memory.authority, AuthorityValidity::Invalid(_)),
        "{:?}",
        world.memory.authority
    );
    let shed_at = world.now;
    assert_eq!(world.memory.authority_invalid_since, Some(shed_at));
    let follow_up = next_poll_in(&world.spec, &world.memory, world.now);
    assert_eq!(follow_up, Duration::from_millis(250));
    // Still invalid at the follow-up: the window counts from when it turned invalid.
    world.advance(follow_up);
    world.poll();
    assert_eq!(world.memory.authority_invalid_since, Some(shed_at));
    // The sidecar unfenced: the next follow-up confirms it and the rhythm is the spec's again.
    world.site_mut("iad").read_only = false;
    world.advance(next_poll_in(&world.spec, &world.memory, world.now));
    world.poll();
    assert!(
        world.memory.authority.is_valid(),
        "{:?}",
        world.memory.authority
    );
    assert_eq!(world.memory.authority_invalid_since, None);
    assert!(world.now.saturating_duration_since(shed_at) <= Duration::from_millis(500));
    assert_eq!(
        next_poll_in(&world.spec, &world.memory, world.now),
        interval
    );
    // An authority invalid for longer than the window: the spec's rhythm.
    let mut stale = world.memory.clone();
    stale.authority =
        AuthorityValidity::Invalid(bloodraven_core::engine::InvalidReason::ActiveNotWritable);
    stale.authority_invalid_since = Some(world.now);
    assert_eq!(
        next_poll_in(&world.spec, &stale, world.now + FOLLOW_UP_WINDOW),
        interval
    );
    // Never issued (bootstrap): nothing to bring back, the spec's rhythm.
    let mut never = stale.clone();
    never.topology_generation = 0;
    assert_eq!(next_poll_in(&world.spec, &never, world.now), interval);
}
