//! Core scenarios of the harness catalogue that involve the operator itself: DNS writes
//! denied (038), operator restarted inside the cooldown (016), primary dying while the
//! operator is down (011) — docs/design/requirements.md R000 and R001.

use crate::support::World;
use bloodraven_core::engine::Action;
use bloodraven_core::GroupMemory;

#[test]
fn scenario_038_dns_write_denied_promotion_right_dns_stale_then_healed_by_a_later_poll() {
    let mut world = World::bootstrapped();
    let iad_ip = world.site("iad").cluster_ip.clone();
    let pdx_ip = world.site("pdx").cluster_ip.clone();
    world.dns_writes_denied = true;
    world.kill("iad");
    world.run_polls(10);
    assert_eq!(world.memory.active_site, "pdx");
    assert!(world.memory.authority.is_valid());
    assert_eq!(
        world.dns.as_ref().unwrap().endpoints[0].targets,
        vec![iad_ip],
        "stays stale, on purpose"
    );
    // Every poll keeps trying (re-derived from live topology, nothing memoised).
    let (_, last) = world.decisions.last().unwrap();
    let applied = last.actions.iter().find_map(|a| match a {
        Action::ApplyDnsEndpoint { spec, .. } => Some(spec.endpoints[0].targets.clone()),
        _ => None,
    });
    assert_eq!(
        applied,
        Some(vec![pdx_ip.clone()]),
        "only ever the active site's target"
    );
    world.dns_writes_denied = false;
    world.run_polls(1);
    assert_eq!(
        world.dns.as_ref().unwrap().endpoints[0].targets,
        vec![pdx_ip]
    );
}

#[test]
fn seed_000_dns_is_never_written_with_a_non_active_target_during_a_failover() {
    let mut world = World::bootstrapped();
    let pdx_ip = world.site("pdx").cluster_ip.clone();
    world.kill("iad");
    world.run_polls(12);
    for (_, decision) in &world.decisions {
        for action in &decision.actions {
            if let Action::ApplyDnsEndpoint { spec, .. } = action {
                let target = &spec.endpoints[0].targets[0];
                let active = &decision.memory.active_site;
                let active_ip = &world.site(active).cluster_ip;
                assert_eq!(target, active_ip, "DNS written for a non-active site");
                assert!(decision.memory.authority.is_valid());
            }
        }
    }
    assert_eq!(
        world.dns.as_ref().unwrap().endpoints[0].targets,
        vec![pdx_ip]
    );
}

#[test]
fn scenario_016_operator_restarted_inside_cooldown_does_not_promote_early() {
    let mut world = World::bootstrapped();
    world.kill("iad");
    world.run_polls(10);
    world.restart("iad");
    world.run_polls(3);
    let cooldown_until = world.memory.cooldown_until.unwrap();
    // Restart: memory comes back from the persisted status only.
    let status = world.memory.to_status();
    world.memory = GroupMemory::from_status(&world.spec, Some(&status), world.now);
    world.kill("pdx");
    while world.now < cooldown_until {
        world.run_polls(1);
        assert_eq!(
            world.memory.active_site, "pdx",
            "promotion inside the cooldown"
        );
    }
    world.run_polls(12);
    assert_eq!(world.memory.active_site, "iad");
}

#[test]
fn scenario_011_primary_dies_while_operator_is_down_no_promotion_until_it_returns() {
    let mut world = World::bootstrapped();
    let status = world.memory.to_status();
    world.kill("iad");
    // Operator down for a minute: time passes, nobody polls.
    world.advance(bloodraven_core::time::Duration::from_secs(60));
    assert_eq!(
        world.writable_sites(),
        Vec::<String>::new(),
        "no writable site without the operator"
    );
    assert!(world.site("pdx").read_only);
    // The operator returns with its persisted status and promotes within the usual budget.
    world.memory = GroupMemory::from_status(&world.spec, Some(&status), world.now);
    let back = world.now;
    for _ in 0..10 {
        world.run_polls(1);
        if world.memory.active_site == "pdx" {
            break;
        }
    }
    assert_eq!(world.memory.active_site, "pdx");
    let promoted = world
        .memory
        .last_failover
        .as_ref()
        .unwrap()
        .promoted_at
        .unwrap();
    let budget = world.spec.detection_floor()
        + world.spec.effective_write_lease()
        + world.spec.poll_interval.get() * 3;
    assert!(
        promoted.saturating_duration_since(back) <= budget,
        "promoted {:?} after return",
        promoted.saturating_duration_since(back)
    );
}

/// Simulator seed 2928 (`--all-faults --restore --image-update`): an emergency failover is
/// volatile memory, but the site it demoted is `role=fenced` in the status. An operator
/// restart that lost the emergency, with no sidecar still caching its move notice, read the
/// active site back as demoted with no move in flight: no failover ever started from it (it
/// was not `Active`), and once it came back it "rejoined as a replica of" itself, the active
/// site labelled a replica (the sim's restore then tripped the fenced-pod assertion).
#[test]
fn sim_seed_2928_restart_that_lost_an_emergency_resumes_it_from_the_demoted_active_site() {
    let mut world = World::bootstrapped();
    // The operator cannot reach the reader: the move notice lands on pdx only, and the lease
    // wait cannot count a majority.
    world.site_mut("reader").operator_cut = true;
    world.kill("iad");
    for _ in 0..12 {
        world.run_polls(1);
        if world.memory.emergency_failover.is_some() {
            break;
        }
    }
    assert!(
        world.memory.emergency_failover.is_some(),
        "the emergency failover from iad started"
    );
    assert_eq!(world.memory.active_site, "iad", "not promoted yet");
    // The operator restarts from its status (the emergency is not in it), and pdx's sidecar
    // restarts too, forgetting the move notice: no sidecar caches it.
    let status = world.memory.to_status();
    world.memory = GroupMemory::from_status(&world.spec, Some(&status), world.now);
    world.restart_sidecar("pdx");
    world.run_polls(2);
    world.site_mut("reader").operator_cut = false;
    world.run_polls_until_active("pdx", 20);
    world.run_polls(3);
    assert!(world.memory.authority.is_valid(), "pdx confirmed writable");
    // iad comes back: a returning primary of pdx, never a replica of itself.
    world.restart("iad");
    world.run_polls(3);
    let rejoined: Vec<&str> = world
        .events_of(bloodraven_core::engine::EventReason::ReturningPrimaryRejoined)
        .iter()
        .map(|event| event.message.as_str())
        .collect();
    assert!(
        rejoined
            .iter()
            .all(|message| !message.contains("replica of iad")),
        "{rejoined:?}"
    );
    let active = world.memory.site("pdx").unwrap().state;
    assert_eq!(active, bloodraven_core::engine::SiteState::Active);
}

/// Simulator seed 298 (`--all-faults --state-loss --status-revert`): a status reverted to a
/// snapshot taken while a move was in flight also reads back a demoted active site. With no
/// sidecar vouching for memory, that stale move is not resumed (it would issue a generation
/// another site may hold): the unvouched rule compares the GTID sets first.
#[test]
fn sim_seed_298_a_demoted_active_site_no_sidecar_vouches_for_is_not_failed_over_blindly() {
    let mut world = World::bootstrapped();
    world.site_mut("reader").operator_cut = true;
    world.kill("iad");
    for _ in 0..12 {
        world.run_polls(1);
        if world.memory.emergency_failover.is_some() {
            break;
        }
    }
    assert!(world.memory.emergency_failover.is_some());
    let status = world.memory.to_status();
    world.memory = GroupMemory::from_status(&world.spec, Some(&status), world.now);
    // Every sidecar restarts: none caches an authority, so nothing vouches for memory.
    world.restart_sidecar("pdx");
    world.restart_sidecar("reader");
    world.site_mut("reader").operator_cut = false;
    world.run_polls(10);
    let resumed = world
        .events_of(bloodraven_core::engine::EventReason::EmergencyFailoverStarted)
        .iter()
        .filter(|event| event.message.contains("demoted with no authority move"))
        .count();
    assert_eq!(resumed, 0, "a move nobody vouches for was resumed");
    assert_eq!(
        world.memory.topology_generation, 1,
        "nothing issued blindly"
    );
}
