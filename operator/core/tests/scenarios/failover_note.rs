//! The `bloodraven.shipstream.io/last-failover` annotation (`FailoverNote`): the operator's own
//! record of its last promotion, kept apart from the status. When the status is reverted to
//! a copy from before that promotion, memory adopts the failover the note names (its site,
//! generation and cooldown) instead of re-running or withholding it (simulator seeds 131 and
//! 298 with `--all-faults --state-loss --status-revert`).

use crate::support::World;
use bloodraven_api::sidecar::Authority;
use bloodraven_api::PlannedFailoverPhase;
use bloodraven_core::engine::{
    Action, EventReason, FailoverNote, NoteReading, NoteSignature, PromotionKind, SiteState,
};

/// Every pod restarts (mysqld read-only, sidecars without authority) and no sidecar remembers
/// any authority or generation: nothing vouches for memory, as in the simulator's seeds.
fn every_pod_restarts(world: &mut World) {
    for name in ["iad", "pdx", "reader"] {
        world.restart(name);
        let site = world.site_mut(name);
        site.latest_authority = None;
        site.known_generation = None;
    }
}

/// Every authority or move notice `world` issued from decision `first` on.
fn issued_since(world: &World, first: usize) -> Vec<Authority> {
    world.decisions[first..]
        .iter()
        .flat_map(|(_, decision)| &decision.actions)
        .filter_map(|action| match action {
            Action::PushAuthority { authority, .. }
            | Action::AnnounceAuthorityMove { authority, .. } => Some(authority.clone()),
            _ => None,
        })
        .collect()
}

/// Events of `reason` raised from event `first` on.
fn events_since(world: &World, first: usize, reason: EventReason) -> Vec<String> {
    world.events[first..]
        .iter()
        .filter(|(_, event)| event.reason == reason)
        .map(|(_, event)| event.message.clone())
        .collect()
}

/// Simulator seed 131: the status reverted to a planned failover iad -> pdx still draining,
/// while the note shows it promoted pdx at generation 2. Memory adopts pdx at 2: the planned
/// failover completes, nothing is promoted again, and no generation is issued but pdx's.
/// Without the note, the drain ran again and re-issued pdx's generation as a new failover
/// (a failover the status history cannot explain: `AuthorityUnexplained`).
#[test]
fn sim_seed_131_a_reverted_status_adopts_the_planned_failover_the_note_names() {
    let mut world = World::bootstrapped();
    world.annotations.planned_failover = Some("pdx".to_string());
    world.run_polls(1);
    assert_eq!(
        world.memory.planned_failover.as_ref().map(|p| p.phase),
        Some(PlannedFailoverPhase::Draining)
    );
    let reverted = world.memory.clone();
    world.run_polls_until_active("pdx", 20);
    world.run_polls(5);
    assert_eq!(world.memory.topology_generation, 2);
    let promoted_at = world
        .memory
        .last_failover
        .as_ref()
        .and_then(|f| f.promoted_at)
        .expect("promoted");
    assert_eq!(
        world.annotations.last_failover,
        Some(Ok(NoteReading::verified(FailoverNote {
            kind: PromotionKind::Planned,
            from: "iad".to_string(),
            to: "pdx".to_string(),
            promoted_at,
            topology_generation: 2,
            restore: None,
        })))
    );
    every_pod_restarts(&mut world);
    world.annotations.cooldown_until = None;
    world.memory = reverted;
    let (first_decision, first_event) = (world.decisions.len(), world.events.len());
    world.run_polls(12);
    let adopted = events_since(&world, first_event, EventReason::AuthorityAdopted);
    assert!(
        adopted
            .iter()
            .any(|message| message.contains("names the planned failover iad->pdx at generation 2")),
        "{adopted:?}"
    );
    assert_eq!(
        (
            world.memory.active_site.as_str(),
            world.memory.topology_generation
        ),
        ("pdx", 2)
    );
    let promoted = events_since(&world, first_event, EventReason::Promoted);
    assert!(promoted.is_empty(), "promoted again: {promoted:?}");
    for authority in issued_since(&world, first_decision) {
        assert_eq!(
            (
                authority.active_site.as_deref(),
                authority.topology_generation
            ),
            (Some("pdx"), 2),
            "issued {authority:?}"
        );
    }
    assert_eq!(
        world.memory.planned_failover.as_ref().map(|p| p.phase),
        Some(PlannedFailoverPhase::Completed)
    );
    let cooldown = promoted_at + world.spec.failover_cooldown.get();
    assert!(
        world.memory.cooldown_until >= Some(cooldown),
        "cooldown {:?}, the note's promotion implies {cooldown:?}",
        world.memory.cooldown_until
    );
    assert_eq!(world.writable_sites(), vec!["pdx".to_string()]);
    assert!(world.memory.authority.is_valid());
    assert!(world.split_brain_at.is_empty());
}

/// Simulator seed 298: the status reverted to iad at generation 1 after an emergency failover
/// to pdx, which has written since. With no sidecar vouching for either, the reverted
/// authority (iad lacks pdx's writes) was withheld for good: no writable site after the
/// faults healed (`NoWritableAfterHeal`). The note names pdx at 2: it is adopted and pdx is
/// writable again; iad, holding nothing pdx lacks, rejoins as its replica.
#[test]
fn sim_seed_298_a_reverted_status_adopts_the_emergency_failover_the_note_names() {
    let mut world = World::bootstrapped();
    let reverted = world.memory.clone();
    world.kill("iad");
    world.run_polls_until_active("pdx", 30);
    world.run_polls(3);
    assert_eq!(world.memory.topology_generation, 2);
    assert!(world.memory.authority.is_valid());
    for _ in 0..20 {
        assert!(world.write("pdx"));
    }
    every_pod_restarts(&mut world);
    world.memory = reverted;
    let first_event = world.events.len();
    world.run_polls(12);
    assert_eq!(world.writable_sites(), vec!["pdx".to_string()]);
    assert_eq!(
        (
            world.memory.active_site.as_str(),
            world.memory.topology_generation
        ),
        ("pdx", 2)
    );
    let adopted = events_since(&world, first_event, EventReason::AuthorityAdopted);
    assert!(
        adopted
            .iter()
            .any(|message| message.contains("names the emergency failover iad->pdx")),
        "{adopted:?}"
    );
    assert_eq!(
        world.memory.site("iad").map(|site| site.state),
        Some(SiteState::Replica)
    );
    assert!(world.split_brain_at.is_empty());
}

/// A note of a failover memory already knows (its generation is not above memory's) changes
/// nothing; a note naming a site no longer in the spec only raises the floor of what is
/// issued next.
#[test]
fn a_note_memory_is_not_behind_or_of_an_unknown_site_moves_no_authority() {
    let mut world = World::bootstrapped();
    let promoted_at = world.now;
    world.annotations.last_failover = Some(Ok(NoteReading::verified(FailoverNote {
        kind: PromotionKind::Emergency,
        from: "pdx".to_string(),
        to: "iad".to_string(),
        promoted_at,
        topology_generation: 1,
        restore: None,
    })));
    let first_event = world.events.len();
    world.run_polls(2);
    assert!(events_since(&world, first_event, EventReason::AuthorityAdopted).is_empty());
    assert_eq!(
        (
            world.memory.active_site.as_str(),
            world.memory.topology_generation
        ),
        ("iad", 1)
    );
    world.annotations.last_failover = Some(Ok(NoteReading::verified(FailoverNote {
        kind: PromotionKind::Planned,
        from: "iad".to_string(),
        to: "sfo".to_string(),
        promoted_at,
        topology_generation: 5,
        restore: None,
    })));
    world.run_polls(1);
    assert_eq!(
        (
            world.memory.active_site.as_str(),
            world.memory.topology_generation,
            world.memory.next_generation()
        ),
        ("iad", 1, 6)
    );
}

/// A malformed note is reported with what is wrong with it and otherwise ignored.
#[test]
fn a_malformed_note_is_reported_and_ignored() {
    let mut world = World::bootstrapped();
    let value = "planned iad->pdx 2026-01-01T00:00:00Z";
    world.annotations.last_failover = Some(FailoverNote::parse(value).map(NoteReading::verified));
    let first_event = world.events.len();
    world.run_polls(1);
    let unreadable = events_since(&world, first_event, EventReason::AnnotationUnreadable);
    assert_eq!(
        unreadable,
        vec![format!(
            "read annotation bloodraven.shipstream.io/last-failover = {value:?}: 3 words, not 5 (or 9 for a restore) (expected \"<kind> <from>-><to> <RFC 3339> generation <N>[ backup <request> discarded <GTID set>]\")"
        )]
    );
    assert_eq!(
        (
            world.memory.active_site.as_str(),
            world.memory.topology_generation
        ),
        ("iad", 1)
    );
    assert!(world.memory.authority.is_valid());
}

/// A note newer than memory whose signature did not verify with the group's operator key (a
/// hand-written annotation: unsigned, signed with another key, or edited after signing) is
/// reported and not adopted: iad stays active at its generation and pdx is not made writable
/// without a GTID comparison. The same note verified is adopted, so the signature is what
/// decides. One no newer than memory is ignored without a word.
#[test]
fn a_newer_note_that_does_not_verify_is_reported_and_not_adopted() {
    let forged = |world: &World, generation: u64, signature: NoteSignature| NoteReading {
        note: FailoverNote {
            kind: PromotionKind::Emergency,
            from: "iad".to_string(),
            to: "pdx".to_string(),
            promoted_at: world.now,
            topology_generation: generation,
            restore: None,
        },
        signature,
    };
    for why in [
        "the value carries no signature",
        "signature does not verify against the group's operator key",
    ] {
        let mut world = World::bootstrapped();
        world.annotations.last_failover = Some(Ok(forged(
            &world,
            7,
            NoteSignature::Rejected(why.to_string()),
        )));
        let first_event = world.events.len();
        world.run_polls(3);
        assert!(events_since(&world, first_event, EventReason::AuthorityAdopted).is_empty());
        let unverified = events_since(&world, first_event, EventReason::AnnotationUnverified);
        assert!(!unverified.is_empty(), "no AnnotationUnverified event");
        assert_eq!(
            unverified[0],
            format!(
                "annotation bloodraven.shipstream.io/last-failover names the emergency failover iad->pdx at generation 7, newer than memory's 1 (iad active), but {why}; not adopted: only a note signed with the group's operator key is"
            )
        );
        assert_eq!(
            (
                world.memory.active_site.as_str(),
                world.memory.topology_generation,
                world.memory.next_generation()
            ),
            ("iad", 1, 2)
        );
        assert_eq!(world.writable_sites(), vec!["iad".to_string()]);
        assert!(world.memory.authority.is_valid());
    }

    let mut world = World::bootstrapped();
    world.annotations.last_failover = Some(Ok(forged(
        &world,
        1,
        NoteSignature::Rejected("the value carries no signature".to_string()),
    )));
    let first_event = world.events.len();
    world.run_polls(2);
    assert!(events_since(&world, first_event, EventReason::AnnotationUnverified).is_empty());

    let mut world = World::bootstrapped();
    world.annotations.last_failover = Some(Ok(forged(&world, 7, NoteSignature::Verified)));
    let first_event = world.events.len();
    world.run_polls(3);
    assert!(
        !events_since(&world, first_event, EventReason::AuthorityAdopted).is_empty(),
        "the verified note was not adopted"
    );
    assert_eq!(
        (
            world.memory.active_site.as_str(),
            world.memory.topology_generation
        ),
        ("pdx", 7)
    );
}
