//! Core scenarios: a spec `MysqlFailoverGroupSpec::validate` refuses decides nothing and says
//! so in the `SpecValid` condition (docs/design/operator.md#mysqlfailovergroup, "An invalid
//! spec builds nothing and says so").

use crate::support::{playground_spec, World};
use bloodraven_api::{Condition, SiteRole};
use bloodraven_core::engine::{
    Action, EventReason, GroupMemory, CONDITION_READY, CONDITION_SPEC_VALID, REASON_SPEC_INVALID,
};

fn condition<'a>(memory: &'a GroupMemory, type_: &str) -> &'a Condition {
    memory
        .conditions
        .iter()
        .find(|condition| condition.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} condition in {:?}", memory.conditions))
}

/// `memory` without its conditions: what `decide` must leave alone while the spec is
/// invalid.
fn without_conditions(memory: &GroupMemory) -> GroupMemory {
    GroupMemory {
        conditions: Vec::new(),
        ..memory.clone()
    }
}

/// Three problems at once: a duplicate site, a read-only initial active site, a zero failure
/// threshold (which, if honoured, would fail a site at its first failed poll).
fn break_spec(world: &mut World) {
    world.spec.sites.push(world.spec.sites[1].clone());
    world.spec.initial_active_site = "reader".to_string();
    world.spec.failure_threshold = 0;
}

#[test]
fn a_new_group_with_an_invalid_spec_gets_spec_valid_false_naming_every_field_and_one_event() {
    let mut world = World::playground();
    break_spec(&mut world);
    let started = world.now;
    let decision = world.poll();
    assert!(
        matches!(decision.actions.as_slice(), [Action::Event(event)] if event.reason == EventReason::SpecInvalid),
        "nothing but the SpecInvalid event: {:?}",
        decision.actions
    );
    let spec_valid = condition(&world.memory, CONDITION_SPEC_VALID).clone();
    assert_eq!(
        (spec_valid.status.as_str(), spec_valid.reason.as_str()),
        ("False", REASON_SPEC_INVALID)
    );
    for field in [
        "spec.sites[3].name: duplicate site \"pdx\"",
        "spec.initialActiveSite: \"reader\" is a read-only site",
        "spec.failureThreshold: must be at least 1",
    ] {
        assert!(spec_valid.message.contains(field), "{}", spec_valid.message);
    }
    assert_eq!(spec_valid.last_transition_time, Some(started));
    assert_eq!(world.events_of(EventReason::SpecInvalid).len(), 1);
    assert_eq!(world.memory.topology_generation, 0, "no authority issued");

    // Later polls say nothing new: no action at all, the condition and its time stay.
    world.run_polls(5);
    assert!(world
        .decisions
        .iter()
        .skip(1)
        .all(|(_, decision)| decision.actions.is_empty()));
    assert_eq!(world.events_of(EventReason::SpecInvalid).len(), 1);
    assert_eq!(condition(&world.memory, CONDITION_SPEC_VALID), &spec_valid);

    // Another problem is news: a new Event and message, the same transition time (the
    // status did not flip).
    world.spec.sites[2].role = SiteRole::ReadWrite;
    world.spec.sites[2].name = String::new();
    world.run_polls(1);
    let changed = condition(&world.memory, CONDITION_SPEC_VALID);
    assert!(
        changed
            .message
            .contains("spec.sites[2].name: must not be empty"),
        "{}",
        changed.message
    );
    assert_eq!(changed.last_transition_time, Some(started));
    assert_eq!(world.events_of(EventReason::SpecInvalid).len(), 2);
}

#[test]
fn a_valid_group_edited_invalid_keeps_what_runs_and_decides_no_failover_until_fixed() {
    let mut world = World::bootstrapped();
    world.run_polls(2);
    let valid = condition(&world.memory, CONDITION_SPEC_VALID).clone();
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("True", "SpecValid")
    );
    let ready = condition(&world.memory, CONDITION_READY).clone();
    let before = world.memory.clone();
    let generation = before.topology_generation;

    break_spec(&mut world);
    let edited_at = world.now + world.spec.poll_interval.get();
    world.kill("iad");
    let polls_before = world.decisions.len();
    // A minute of polls with the active site dead: with failureThreshold 0 honoured, or the
    // spec's sites taken at their word, a failover would have started at the first.
    world.run_polls(30);
    let held = &world.decisions[polls_before..];
    assert!(
        matches!(held[0].1.actions.as_slice(), [Action::Event(event)] if event.reason == EventReason::SpecInvalid),
        "{:?}",
        held[0].1.actions
    );
    assert!(
        held[1..]
            .iter()
            .all(|(_, decision)| decision.actions.is_empty()),
        "no taint, label, Service, DNS record, push, fence or promotion while invalid"
    );
    assert_eq!(
        without_conditions(&world.memory),
        without_conditions(&before),
        "memory stays as the valid spec left it"
    );
    assert_eq!(world.memory.active_site, "iad");
    assert!(world.site("pdx").read_only, "pdx never promoted");
    assert!(world.taints.is_empty(), "no node tainted");
    let spec_valid = condition(&world.memory, CONDITION_SPEC_VALID);
    assert_eq!(
        (
            spec_valid.status.as_str(),
            spec_valid.reason.as_str(),
            spec_valid.last_transition_time
        ),
        ("False", REASON_SPEC_INVALID, Some(edited_at))
    );
    assert_eq!(
        condition(&world.memory, CONDITION_READY),
        &ready,
        "the other conditions stay as the last valid poll left them"
    );

    // Fixed: SpecValid=True again from that poll on, and failure detection starts from the
    // polls of the valid spec (the invalid minute counts for nothing).
    world.spec = playground_spec();
    world.run_polls(1);
    let fixed_at = world.now;
    let valid_again = condition(&world.memory, CONDITION_SPEC_VALID);
    assert_eq!(
        (
            valid_again.status.as_str(),
            valid_again.last_transition_time
        ),
        ("True", Some(fixed_at))
    );
    world.run_polls_until_active("pdx", 30);
    assert_eq!(world.memory.topology_generation, generation + 1);
    let detected_at = world
        .memory
        .last_failover
        .as_ref()
        .and_then(|failover| failover.detected_at)
        .expect("detectedAt");
    assert!(
        detected_at.saturating_duration_since(fixed_at) + world.spec.poll_interval.get()
            >= world.spec.detection_floor(),
        "detected at {detected_at:?}, fixed at {fixed_at:?}: the detection floor spans polls of the valid spec"
    );
    assert!(world.split_brain_at.is_empty());
}
