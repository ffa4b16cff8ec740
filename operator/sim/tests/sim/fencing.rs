//! Scenario tests of the fencing mechanisms (operator/controller/README.md#fencing,
//! docs/design/history.md#issue-10): a world with no scheduled faults, one fault injected by
//! hand, and the world stepped to see what fences the old primary and when.
//!
//! Each test fails if its mechanism is removed: without mysqld's write deadline nothing fences
//! a primary whose sidecar crashed or hangs; without the watchdog a frozen primary is never
//! killed and thaws writable after the promotion.

use bloodraven_sim::clock::SimTime;
use bloodraven_sim::faults::{FaultEvent, Target};
use bloodraven_sim::operator::WRITE_LEASE_MILLIS;
use bloodraven_sim::world::{Event, World};
use bloodraven_sim::{FindingClass, RunOutcome, SimConfig};

const IAD: usize = 0;
const PDX: usize = 1;

/// When the fault is injected: long after bootstrap (iad writable, every replica caught up).
const FAULT_AT_MILLIS: u64 = 20_000;

/// Step of the scans below.
const STEP_MILLIS: u64 = 10;

/// A world of `seed` whose runs are too short for the fault schedule (it draws faults only
/// before the quiet tail), with held client connections, run to the fault instant.
fn quiet_world(seed: u64) -> World {
    let config = SimConfig {
        duration: SimTime(120_000),
        held_connections: true,
        trace: true,
        ..SimConfig::new(seed)
    };
    let mut world = World::new(config);
    world.run_until(SimTime(FAULT_AT_MILLIS));
    assert!(
        world.sites[IAD].accepts_writes(),
        "iad bootstrapped writable"
    );
    assert!(world.faults.none_active());
    world
}

fn inject(world: &mut World, at_millis: u64, fault: FaultEvent) {
    world.schedule_at(SimTime(at_millis), Event::Fault(fault));
}

/// Steps `world` until `done` holds, at most until `deadline_millis`; returns when it held.
fn step_until(
    world: &mut World,
    deadline_millis: u64,
    done: impl Fn(&World) -> bool,
) -> Option<SimTime> {
    while world.now.as_millis() < deadline_millis {
        let next = world.now.plus_millis(STEP_MILLIS);
        world.run_until(next);
        if done(world) {
            return Some(world.now);
        }
    }
    None
}

fn non_inherent(outcome: &RunOutcome) -> Vec<(FindingClass, u64)> {
    outcome
        .counts
        .iter()
        .filter(|(class, _)| !class.is_inherent())
        .map(|(&class, &count)| (class, count))
        .collect()
}

/// When the first trace line containing `needle` was written (the trace prints seconds with
/// three decimals first).
fn trace_time(world: &World, needle: &str) -> SimTime {
    let line = world
        .trace
        .text()
        .lines()
        .find(|line| line.contains(needle))
        .unwrap_or_else(|| panic!("no trace line with {needle:?}"));
    let seconds: f64 = line
        .split_whitespace()
        .next()
        .and_then(|first| first.parse().ok())
        .unwrap_or_else(|| panic!("no time on {line:?}"));
    SimTime((seconds * 1000.0).round() as u64)
}

fn findings_text(outcome: &RunOutcome) -> String {
    outcome
        .findings
        .iter()
        .map(|f| format!("{} at {}: {}", f.class, f.at, f.detail))
        .collect::<Vec<_>>()
        .join("\n")
}

// docs/design/history.md#issue-10-case-2 (scenario 027): the active site's sidecar is killed
// and kept down. mysqld's write deadline, armed by the sidecar to the lease left minus 1.1 s,
// fences it before the lease the peers granted runs out, so the promotion that follows finds it
// read-only.
#[test]
fn issue_10_sidecar_crash_write_deadline_fences_mysqld_before_the_lease_ends() {
    for seed in [1, 2, 3] {
        let mut world = quiet_world(seed);
        inject(
            &mut world,
            FAULT_AT_MILLIS,
            FaultEvent::SidecarCrash {
                id: 1,
                target: Target::Site(IAD),
            },
        );
        let fenced = step_until(&mut world, 40_000, |w| !w.sites[IAD].accepts_writes());
        let Some(fenced) = fenced else {
            panic!("seed {seed}: nothing fenced iad after its sidecar died");
        };
        let after = fenced.millis_since(SimTime(FAULT_AT_MILLIS));
        assert!(
            after < WRITE_LEASE_MILLIS - 100,
            "seed {seed}: iad read-only {after} ms after its sidecar died, lease {WRITE_LEASE_MILLIS} ms"
        );
        assert!(world.sites[IAD].mysqld_up, "fenced, not killed");
        assert!(world.stats.deadline_fences >= 1);
        let promoted = step_until(&mut world, 60_000, |w| {
            w.operator.active_of_max_generation == Some(PDX)
        });
        assert!(promoted.is_some(), "seed {seed}: pdx promoted");
        let outcome = world.run();
        assert_eq!(
            non_inherent(&outcome),
            vec![],
            "seed {seed}:\n{}",
            findings_text(&outcome)
        );
    }
}

// docs/design/history.md#issue-10: a hung sidecar renews nothing and fences nothing; its
// mysqld's write deadline keeps running and fences it before the lease ends. When it resumes,
// it is fenced at once by the authority that moved while it hung.
#[test]
fn issue_10_sidecar_hang_stops_renewals_and_the_deadline_fences_mysqld() {
    for seed in [1, 2, 3] {
        let mut world = quiet_world(seed);
        inject(
            &mut world,
            FAULT_AT_MILLIS,
            FaultEvent::SidecarHang {
                id: 1,
                target: Target::Site(IAD),
            },
        );
        world.run_until(SimTime(FAULT_AT_MILLIS + 1));
        assert!(world.sidecars[IAD].hung && world.sidecars[IAD].up());
        let fenced = step_until(&mut world, 40_000, |w| !w.sites[IAD].accepts_writes());
        let Some(fenced) = fenced else {
            panic!("seed {seed}: nothing fenced iad while its sidecar hung");
        };
        let after = fenced.millis_since(SimTime(FAULT_AT_MILLIS));
        assert!(
            after < WRITE_LEASE_MILLIS - 100,
            "seed {seed}: iad read-only {after} ms after its sidecar hung"
        );
        let mono = world.sidecars[IAD].mono(world.now);
        let remaining = world.sidecars[IAD]
            .lease
            .as_ref()
            .map_or(0, |lease| lease.lease_remaining_ms(mono));
        assert!(
            remaining < WRITE_LEASE_MILLIS - after + 100,
            "seed {seed}: a hung sidecar renewed its lease ({remaining} ms left)"
        );
        let promoted = step_until(&mut world, 60_000, |w| {
            w.operator.active_of_max_generation == Some(PDX)
        });
        assert!(promoted.is_some(), "seed {seed}: pdx promoted");
        inject(&mut world, 70_000, FaultEvent::Heal { id: 1 });
        world.run_until(SimTime(70_500));
        assert!(!world.sidecars[IAD].hung);
        assert!(!world.sites[IAD].accepts_writes());
        let outcome = world.run();
        assert_eq!(
            non_inherent(&outcome),
            vec![],
            "seed {seed}:\n{}",
            findings_text(&outcome)
        );
    }
}

// docs/design/history.md#issue-10-case-3 (scenarios 021, 028): the active site's mysqld is
// frozen while writable. Its sidecar's watchdog kills it once no lease covers it (the moving
// notice drops the lease), before the operator promotes pdx; the writes sent into the freeze
// die with it, and the thaw finds nothing left to thaw.
#[test]
fn issue_10_frozen_primary_is_killed_by_the_watchdog_before_the_promotion() {
    for seed in [1, 2, 3] {
        let mut world = quiet_world(seed);
        inject(
            &mut world,
            FAULT_AT_MILLIS,
            FaultEvent::MysqldFreeze {
                id: 1,
                target: Target::Site(IAD),
            },
        );
        inject(&mut world, 60_000, FaultEvent::Heal { id: 1 });
        let killed = step_until(&mut world, 60_000, |w| !w.sites[IAD].mysqld_up);
        let Some(killed) = killed else {
            panic!("seed {seed}: the frozen iad was never killed");
        };
        assert_eq!(
            world.operator.active_of_max_generation,
            Some(IAD),
            "seed {seed}: killed at {killed}, before any promotion"
        );
        assert_eq!(world.stats.watchdog_kills, 1);
        assert!(world.clients.pending[IAD].is_empty());
        let promoted = step_until(&mut world, 60_000, |w| {
            w.operator.active_of_max_generation == Some(PDX)
        });
        assert!(promoted.is_some(), "seed {seed}: pdx promoted");
        let outcome = world.run();
        assert_eq!(
            non_inherent(&outcome),
            vec![],
            "seed {seed}:\n{}",
            findings_text(&outcome)
        );
    }
}

/// The double fault of docs/design/history.md#issue-10: mysqld of iad frozen while writable,
/// then its sidecar killed and kept down; both healed long after the promotion (70 s, 75 s).
fn double_fault(no_agentless_kill: bool) -> (World, Option<SimTime>) {
    let config = SimConfig {
        duration: SimTime(120_000),
        held_connections: true,
        trace: true,
        no_agentless_kill,
        ..SimConfig::new(1)
    };
    let mut world = World::new(config);
    world.run_until(SimTime(FAULT_AT_MILLIS));
    assert!(
        world.sites[IAD].accepts_writes(),
        "iad bootstrapped writable"
    );
    inject(
        &mut world,
        FAULT_AT_MILLIS,
        FaultEvent::MysqldFreeze {
            id: 1,
            target: Target::Site(IAD),
        },
    );
    inject(
        &mut world,
        FAULT_AT_MILLIS + 500,
        FaultEvent::SidecarCrash {
            id: 2,
            target: Target::Site(IAD),
        },
    );
    let promoted = step_until(&mut world, 60_000, |w| {
        w.operator.active_of_max_generation == Some(PDX)
    });
    inject(&mut world, 70_000, FaultEvent::Heal { id: 1 });
    inject(&mut world, 75_000, FaultEvent::Heal { id: 2 });
    (world, promoted)
}

// docs/design/history.md#issue-10, the double fault, with the operator's agentless kill
// switched off (the rule before it): nothing in the pod can fence iad (the switch runs inside
// the frozen process, the watchdog inside the dead one), the writes sent into the freeze commit
// at the thaw, after pdx's first. The simulator must find it, as the harness would, and
// classify it by its cause.
#[test]
fn issue_10_frozen_mysqld_without_its_agent_is_split_brain_frozen_agentless() {
    let (world, promoted) = double_fault(true);
    assert!(promoted.is_some(), "pdx promoted");
    assert!(world.sites[IAD].frozen, "nothing killed the frozen iad");
    assert!(!world.clients.pending[IAD].is_empty(), "writes wait on iad");
    let outcome = world.run();
    let found = non_inherent(&outcome);
    assert!(
        found
            .iter()
            .any(|(class, _)| *class == FindingClass::SplitBrainFrozenAgentless),
        "{found:?}\n{}",
        findings_text(&outcome)
    );
    assert!(
        found
            .iter()
            .all(|(class, _)| *class == FindingClass::SplitBrainFrozenAgentless),
        "{found:?}\n{}",
        findings_text(&outcome)
    );
}

// docs/design/history.md#issue-10, the double fault with the operator's rule on (core
// `engine::agentless`): the kubelet reports iad's sidecar not ready, the operator deletes the
// pod, the kubelet SIGKILLs the frozen mysqld where it stopped, and only then is pdx promoted.
// The writes sent into the freeze are never acknowledged; no finding.
#[test]
fn issue_10_the_kubelet_kills_the_frozen_agentless_primary_before_the_promotion() {
    let (world, promoted) = double_fault(false);
    let promoted = promoted.expect("pdx promoted");
    assert!(
        !world.sites[IAD].frozen,
        "the kubelet killed the frozen iad"
    );
    assert!(
        world.clients.pending[IAD].is_empty(),
        "the writes into the freeze were dropped"
    );
    assert!(
        world.pods[IAD].terminating || world.pods[IAD].generation >= 1,
        "iad's pod was deleted"
    );
    assert!(
        world
            .trace
            .text()
            .contains("SIGKILLs the containers of pod iad-0 (mysqld frozen)"),
        "the kill of the frozen mysqld is in the trace"
    );
    let kill_at = trace_time(&world, "SIGKILLs the containers of pod iad-0");
    assert!(
        kill_at < promoted,
        "killed at {kill_at:?}, promoted at {promoted:?}"
    );
    let outcome = world.run();
    assert_eq!(
        non_inherent(&outcome),
        vec![],
        "{}",
        findings_text(&outcome)
    );
}
