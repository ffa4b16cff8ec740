//! Core scenarios: `healthy` of read-write replicas and of the read-only reader (the five
//! conjuncts of docs/design/requirements.md R000.7, EffectiveReadOnlyMaxLagSeconds of R000.8).

use crate::support::{labels_of, playground_spec, World};
use bloodraven_core::engine::PodRole;

fn reader_healthy(world: &mut World) -> bool {
    let decision = world.poll();
    let (role, healthy) = labels_of(&decision, "reader").unwrap();
    assert_eq!(role, PodRole::Replica);
    healthy
}

#[test]
fn seed_000_reader_with_all_five_conjuncts_is_healthy() {
    let mut world = World::bootstrapped();
    world.site_mut("reader").seconds_behind = 30;
    assert!(
        reader_healthy(&mut world),
        "lag 30 <= maxLagSeconds 30 (nil inherits)"
    );
}

#[test]
fn seed_000_reader_lag_over_inherited_max_lag_seconds_is_unhealthy() {
    let mut world = World::bootstrapped();
    world.site_mut("reader").seconds_behind = 31;
    assert!(!reader_healthy(&mut world));
}

#[test]
fn seed_000_reader_replication_not_running_is_unhealthy() {
    let mut world = World::bootstrapped();
    world.site_mut("reader").running = false;
    assert!(
        !reader_healthy(&mut world),
        "replicating false (and secondsBehindSource nil)"
    );
}

#[test]
fn seed_000_reader_chained_through_pdx_is_unhealthy() {
    let mut world = World::bootstrapped();
    world.site_mut("reader").source = Some("pdx".to_string());
    let observation = world.observe();
    let decision = bloodraven_core::decide(&world.spec, &world.memory, &observation, world.now);
    let (_, healthy) = labels_of(&decision, "reader").unwrap();
    assert!(!healthy, "a replication chain is not a direct source");
}

#[test]
fn seed_000_reader_with_errant_transactions_is_not_converged() {
    let mut world = World::bootstrapped();
    world
        .site_mut("reader")
        .gtid
        .insert(bloodraven_mysql::Gtid::mariadb(0, 3, 500));
    assert!(!reader_healthy(&mut world));
}

#[test]
fn seed_000_explicit_zero_read_only_max_lag_demands_zero_lag() {
    let mut spec = playground_spec();
    spec.sites[2].read_only_max_lag_seconds = Some(0);
    let mut world = World::with_spec(spec);
    world.poll();
    world.run_polls(3);
    world.site_mut("reader").seconds_behind = 0;
    assert!(reader_healthy(&mut world));
    world.site_mut("reader").seconds_behind = 1;
    assert!(
        !reader_healthy(&mut world),
        "explicit 0 is not nil: any lag is too much"
    );
}

#[test]
fn seed_000_explicit_read_only_max_lag_overrides_max_lag_seconds() {
    let mut spec = playground_spec();
    spec.sites[2].read_only_max_lag_seconds = Some(100);
    let mut world = World::with_spec(spec);
    world.poll();
    world.run_polls(3);
    world.site_mut("reader").seconds_behind = 90;
    assert!(reader_healthy(&mut world));
}

#[test]
fn read_write_replica_needs_running_replication_from_the_active_site() {
    // docs/design/operator.md#per-site-health-and-labels: healthy=yes for a read-write replica
    // needs replication running and source converged.
    let mut world = World::bootstrapped();
    world.site_mut("pdx").seconds_behind = 1000;
    let decision = world.poll();
    assert_eq!(
        labels_of(&decision, "pdx"),
        Some((PodRole::Replica, true)),
        "lag alone does not unhealthy a read-write replica"
    );
    world.site_mut("pdx").running = false;
    let decision = world.poll();
    assert_eq!(labels_of(&decision, "pdx"), Some((PodRole::Replica, false)));
}
