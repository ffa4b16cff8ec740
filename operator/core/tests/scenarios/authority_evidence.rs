//! Core scenarios of docs/design/history.md#issue-10-case-4 and #issue-10-case-7: the evidence
//! the operator acts on is what the sidecars run with and report, not today's spec or its own
//! (possibly reverted) memory.
//!
//! - case 4: the lease wait waits out the longest lease a sidecar grants and counts a majority
//!   of every site set in play;
//! - case 7: a peer's uptime is what its sidecar reports, bootstrap compares GTID sets, and no
//!   authority is issued below a generation a sidecar reports.

use crate::support::{playground_spec, World};
use bloodraven_api::sidecar::LeaseTerms;
use bloodraven_api::{
    FailoverKind, GoDuration, PlannedFailoverPhase, SiteRole, SiteSpec, WriteLeaseSpec,
};
use bloodraven_core::engine::{Action, EventReason, GroupMemory, CLOCK_DRIFT_MARGIN};
use bloodraven_core::time::{Duration, Timestamp};
use bloodraven_mysql::Gtid;

/// When the first move notice of the run was announced.
fn announced_at(world: &World) -> Timestamp {
    world
        .decisions
        .iter()
        .find(|(_, decision)| {
            decision
                .actions
                .iter()
                .any(|action| matches!(action, Action::AnnounceAuthorityMove { .. }))
        })
        .map(|(at, _)| *at)
        .expect("a move was announced")
}

fn promoted_at(world: &World) -> Timestamp {
    world
        .memory
        .last_failover
        .as_ref()
        .and_then(|failover| failover.promoted_at)
        .expect("a promotion")
}

/// Polls until `world` is bootstrapped (iad writable, authority valid).
fn bootstrap(world: &mut World) {
    world.poll();
    world.run_polls(3);
    assert!(
        world.memory.authority.is_valid(),
        "bootstrap did not validate authority"
    );
}

fn terms(duration: Duration, sites: &[&str]) -> LeaseTerms {
    LeaseTerms {
        duration_ms: duration.as_millis() as u64,
        sites: sites.iter().map(|site| site.to_string()).collect(),
    }
}

#[test]
fn issue_10_case_4_a_lowered_spec_lease_still_waits_out_the_lease_the_sidecars_grant() {
    // The spec's writeLease was lowered to 2 s after the pods were created with 6 s
    // (StatefulSets are OnDelete): the sidecars still grant 6 s. iad is cut off from the
    // operator only and keeps renewing from its peers until they cache the move notice.
    let mut spec = playground_spec();
    spec.write_lease = WriteLeaseSpec {
        duration: Some(GoDuration::from_secs(2)),
    };
    let mut world = World::with_spec(spec);
    let six = Duration::from_secs(6);
    for site in &mut world.sites {
        site.lease_duration = Some(six);
        site.pod_lease_terms = Some(terms(six, &["iad", "pdx", "reader"]));
    }
    bootstrap(&mut world);
    world.site_mut("iad").operator_cut = true;
    world.run_polls_until_active("pdx", 30);
    let waited = promoted_at(&world).saturating_duration_since(announced_at(&world));
    assert!(
        waited > six + CLOCK_DRIFT_MARGIN,
        "waited {waited:?}: not the 6 s lease the sidecars grant"
    );
    world.run_polls(3);
    assert!(
        world.split_brain_at.is_empty(),
        "two writable sites at {:?}",
        world.split_brain_at
    );
}

#[test]
fn issue_10_case_4_a_grown_site_set_needs_a_majority_of_the_old_set_too() {
    // Two read-only sites were added (sfo, sea); the old pods still run with the old set
    // {iad, pdx, reader}, so iad needs only pdx's grant. The reader is cut from its peers
    // (its last grant to iad is old), iad from the operator. A majority of the new set
    // {reader, sfo, sea} vouches at once, yet pdx granted iad a moment ago: only a majority
    // of the old set as well proves iad's lease over.
    let mut spec = playground_spec();
    for name in ["sfo", "sea"] {
        spec.sites.push(SiteSpec {
            name: name.to_string(),
            role: SiteRole::ReadOnly,
            read_only_max_lag_seconds: None,
            node_selector: Default::default(),
        });
    }
    let mut world = World::with_spec(spec);
    let old = ["iad", "pdx", "reader"];
    let lease = world.spec.effective_write_lease();
    for site in world
        .sites
        .iter_mut()
        .filter(|s| old.contains(&s.name.as_str()))
    {
        site.lease_sites = Some(old.iter().map(|s| s.to_string()).collect());
        site.pod_lease_terms = Some(terms(lease, &old));
    }
    bootstrap(&mut world);
    world.site_mut("reader").peer_cut = true;
    world.run_polls(6);
    world.site_mut("iad").operator_cut = true;
    world.run_polls_until_active("pdx", 30);
    let waited = promoted_at(&world).saturating_duration_since(announced_at(&world));
    assert!(
        waited > lease + CLOCK_DRIFT_MARGIN,
        "waited {waited:?}: pdx's last grant to iad was younger than the lease"
    );
    assert!(
        !world.events_of(EventReason::LeaseTermsDiffer).is_empty(),
        "the differing site sets are reported"
    );
    world.run_polls(3);
    assert!(
        world.split_brain_at.is_empty(),
        "two writable sites at {:?}",
        world.split_brain_at
    );
}

#[test]
fn issue_10_case_7_a_restarted_peer_counts_by_the_uptime_its_sidecar_reports() {
    // pdx's sidecar restarts right after it cached the move notice: its grants to iad are
    // forgotten, and the pod status still shows the old container start. Counted by the pod
    // status, pdx would vouch at once (no grant, long up) with the reader (cut from its peers
    // long ago), while iad's lease from pdx's last grant still runs.
    let mut world = World::bootstrapped();
    world.site_mut("reader").peer_cut = true;
    world.run_polls(6);
    world.site_mut("iad").operator_cut = true;
    let has_notice = |world: &World| {
        world
            .site("pdx")
            .authority
            .as_ref()
            .is_some_and(|a| a.active_site.is_none())
    };
    while !has_notice(&world) {
        world.run_polls(1);
        assert!(world.decisions.len() < 100, "no move notice reached pdx");
    }
    world.restart_sidecar("pdx");
    world.run_polls_until_active("pdx", 30);
    let waited = promoted_at(&world).saturating_duration_since(announced_at(&world));
    assert!(
        waited > world.spec.effective_write_lease() + CLOCK_DRIFT_MARGIN,
        "waited {waited:?}: a restarted pdx vouched for grants it forgot"
    );
    world.run_polls(3);
    assert!(
        world.split_brain_at.is_empty(),
        "two writable sites at {:?}",
        world.split_brain_at
    );
}

#[test]
fn issue_10_case_7_bootstrap_over_retained_volumes_names_the_site_holding_every_transaction() {
    // A group recreated over retained volumes: pdx committed transactions iad never saw.
    // initialActiveSite is iad; handing it generation 1 would make pdx's transactions errant.
    let mut world = World::playground();
    for seq in 11..=15 {
        world.site_mut("pdx").gtid.insert(Gtid::mariadb(0, 2, seq));
    }
    world.run_polls(4);
    assert_eq!(world.memory.active_site, "pdx");
    assert_eq!(world.memory.topology_generation, 1);
    assert!(world.memory.authority.is_valid());
    assert_eq!(world.writable_sites(), vec!["pdx".to_string()]);
    let recovered = world.events_of(EventReason::AuthorityRecovered);
    assert!(
        recovered
            .first()
            .is_some_and(|event| event.message.contains("iad") && event.message.contains("lacks 5")),
        "{recovered:?}"
    );
    assert!(world.split_brain_at.is_empty());
}

#[test]
fn issue_10_case_7_bootstrap_withholds_the_authority_when_histories_diverged() {
    // Both read-write sites hold transactions the other lacks: no site is named, nothing is
    // writable, and the event says which site lacks what.
    let mut world = World::playground();
    world.site_mut("iad").gtid.insert(Gtid::mariadb(0, 1, 11));
    world.site_mut("pdx").gtid.insert(Gtid::mariadb(0, 2, 11));
    world.run_polls(4);
    assert_eq!(world.memory.topology_generation, 0);
    assert!(world.writable_sites().is_empty());
    assert!(!world.memory.authority.is_valid());
    let withheld = world.events_of(EventReason::AuthorityWithheld);
    assert!(
        withheld
            .last()
            .is_some_and(|event| event.message.contains("pdx holds 1 it lacks")),
        "{withheld:?}"
    );
    let pushed = world.decisions.iter().any(|(_, decision)| {
        decision
            .actions
            .iter()
            .any(|action| matches!(action, Action::PushAuthority { .. }))
    });
    assert!(!pushed, "no authority pushed");
}

#[test]
fn issue_10_case_7_a_reverted_status_never_issues_a_generation_below_a_sidecars() {
    // The simulator's --status-revert (seed 145): the status reverts to a planned failover
    // iad -> pdx in Draining at generation 1, while the sidecars cache the move notice of
    // generation 3 (pdx was promoted at 2 and has since failed). Aborting that stale drain
    // would re-assert iad at generation 2, below what the sidecars hold.
    let mut world = World::bootstrapped();
    world.annotations.planned_failover = Some("pdx".to_string());
    world.run_polls(1);
    assert_eq!(
        world.memory.planned_failover.as_ref().map(|p| p.phase),
        Some(PlannedFailoverPhase::Draining)
    );
    let reverted = world.memory.clone();
    world.run_polls_until_active("pdx", 20);
    world.run_polls(20);
    assert_eq!(world.memory.topology_generation, 2);
    world.site_mut("pdx").operator_cut = true;
    world.site_mut("pdx").peer_cut = true;
    while world
        .site("iad")
        .authority
        .as_ref()
        .map(|a| (a.active_site.is_none(), a.topology_generation))
        != Some((true, 3))
    {
        world.run_polls(1);
        assert!(
            world.decisions.len() < 200,
            "no move notice of generation 3"
        );
    }
    // The operator restarts from the reverted status.
    world.memory = reverted;
    let first = world.decisions.len();
    world.run_polls(12);
    for (_, decision) in &world.decisions[first..] {
        for action in &decision.actions {
            if let Action::PushAuthority { authority, .. }
            | Action::AnnounceAuthorityMove { authority, .. } = action
            {
                assert!(
                    authority.topology_generation >= 3,
                    "issued {authority:?} below the generation 3 the sidecars cache"
                );
            }
        }
    }
    assert!(
        world.memory.topology_generation >= 3,
        "{:?}",
        world.memory.topology_generation
    );
    // The move notice names pdx as the site the move is away from: the failover resumed from
    // it, not from the iad the reverted memory names (simulator seed 28 recorded iad -> iad).
    assert_eq!(
        world
            .memory
            .last_failover
            .as_ref()
            .map(|f| (f.from.as_str(), f.to.as_str())),
        Some(("pdx", "iad"))
    );
    assert_eq!(
        world.memory.planned_failover.as_ref().map(|p| p.phase),
        Some(PlannedFailoverPhase::Rejected)
    );
    assert!(world.split_brain_at.is_empty());
}

/// Every authority or move notice `world` issued from decision `first` on.
fn issued_since(world: &World, first: usize) -> Vec<bloodraven_api::sidecar::Authority> {
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

/// A bootstrapped world after a planned failover to pdx (generation 2), and the memory from
/// before it (what a status revert brings back: iad at generation 1).
fn promoted_pdx_and_memory_before() -> (World, GroupMemory) {
    let mut world = World::bootstrapped();
    let reverted = world.memory.clone();
    world.annotations.planned_failover = Some("pdx".to_string());
    world.run_polls_until_active("pdx", 30);
    world.run_polls(5);
    assert_eq!(world.memory.topology_generation, 2);
    (world, reverted)
}

#[test]
fn issue_10_case_7_a_reverted_status_adopts_the_authority_a_sidecar_forgot_when_mysqld_restarted() {
    // Simulator seed 125 (`--state-loss --status-revert`): pdx was promoted at generation 2;
    // its mysqld restarted, so its sidecar forgot the cached authority (the startup safety
    // net), and the status reverted to iad at generation 1. The sidecar still reports the
    // authority it accepted last: the operator adopts pdx at 2 instead of re-issuing iad at 1.
    let (mut world, reverted) = promoted_pdx_and_memory_before();
    let issued = world.site("pdx").authority.clone();
    assert_eq!(
        issued.as_ref().and_then(|a| a.active_site.as_deref()),
        Some("pdx")
    );
    for site in &mut world.sites {
        site.latest_authority = site.authority.take();
        site.known_generation = site
            .latest_authority
            .as_ref()
            .map(|a| a.topology_generation);
    }
    world.site_mut("iad").latest_authority = None;
    world.site_mut("reader").latest_authority = None;
    world.memory = reverted;
    let first = world.decisions.len();
    world.run_polls(3);
    assert_eq!(world.memory.active_site, "pdx");
    assert_eq!(world.memory.topology_generation, 2);
    for authority in issued_since(&world, first) {
        assert!(
            authority.topology_generation >= 2,
            "issued {authority:?} below the generation 2 a sidecar reports"
        );
    }
    assert!(world.split_brain_at.is_empty());
}

#[test]
fn issue_10_case_7_a_generation_known_but_cached_by_no_sidecar_that_answers_is_issued_above() {
    // Simulator seed 496 (`--state-loss --status-revert`): the status reverted to iad at
    // generation 1 while pdx, promoted at 2, is cut from the operator. iad's sidecar cached
    // generation 1 but learned from pdx's lease answer that 2 was issued. Re-asserting iad at
    // 1, or issuing a 2 of its own, would collide with pdx's authority: the operator fails over
    // above 2. Its status keeps naming what memory did issue (iad at 1), never iad at 2 (whose
    // holder it cannot know: seed 0 published exactly that).
    let (mut world, reverted) = promoted_pdx_and_memory_before();
    world.site_mut("pdx").operator_cut = true;
    world.site_mut("pdx").read_only = true;
    let stale = world.site("iad").authority.clone().map(|mut a| {
        a.active_site = Some("iad".to_string());
        a.topology_generation = 1;
        a
    });
    for name in ["iad", "reader"] {
        let site = world.site_mut(name);
        site.authority = stale.clone();
        site.latest_authority = stale.clone();
        site.known_generation = Some(1);
    }
    world.site_mut("iad").known_generation = Some(2);
    world.memory = reverted;
    // The `last-failover` annotation is lost too (its write failed): only the sidecars'
    // evidence is left (with it, memory adopts pdx at 2: failover_note.rs).
    world.annotations.last_failover = None;
    let first = world.decisions.len();
    world.poll();
    let adopted = world.events_of(EventReason::AuthorityAdopted);
    assert!(
        adopted
            .iter()
            .any(|event| event.message.contains("knows topology generation 2")),
        "{adopted:?}"
    );
    assert_eq!(
        (
            world.memory.topology_generation,
            world.memory.unadopted_generation,
            world.memory.active_site.as_str()
        ),
        (1, 2, "iad")
    );
    assert!(world.memory.emergency_failover.is_some());
    world.run_polls(40);
    assert!(world.memory.topology_generation >= 3);
    let issued = issued_since(&world, first);
    assert!(!issued.is_empty());
    for authority in issued {
        assert!(
            authority.topology_generation >= 3,
            "issued {authority:?}: not above the generation 2 a sidecar knows of"
        );
    }
    assert!(world.split_brain_at.is_empty());
}

#[test]
fn issue_10_case_7_an_authority_recovered_to_another_site_is_a_promotion_with_cooldown_and_last_failover(
) {
    // Simulator seed 463 (`--all-faults`): iad dies and the move is announced; pdx and the
    // reader die too (their cached move notice with them) and the operator restarts from a
    // status without the emergency in flight. Every pod comes back without authority: memory
    // names iad (demoted), pdx holds every transaction, so the authority is recovered to pdx.
    // It moved the authority to another site with no lastFailover and no cooldown: the
    // harness saw an active-site change with no failover, and a planned failover 27 s later
    // ran inside what is a cooldown for everyone else.
    let mut world = World::bootstrapped();
    world.kill("iad");
    while world.memory.emergency_failover.is_none() {
        world.run_polls(1);
        assert!(world.decisions.len() < 30, "no emergency failover started");
    }
    world.kill("pdx");
    world.kill("reader");
    world.run_polls(1);
    let status = world.memory.to_status();
    world.memory = GroupMemory::from_status(&world.spec, Some(&status), world.now);
    assert!(world.memory.last_failover.is_none());
    for site in ["iad", "pdx", "reader"] {
        world.restart(site);
    }
    world.run_polls_until_active("pdx", 20);
    assert!(!world.events_of(EventReason::AuthorityRecovered).is_empty());
    let last = world
        .memory
        .last_failover
        .clone()
        .expect("lastFailover recorded");
    assert_eq!((last.from.as_str(), last.to.as_str()), ("iad", "pdx"));
    assert_eq!(last.kind, FailoverKind::Emergency);
    assert!(last.promoted_at.is_some());
    assert_eq!(last.lost_transactions, 0);
    assert!(
        world
            .memory
            .cooldown_until
            .is_some_and(|until| until > world.now),
        "no cooldown started: {:?}",
        world.memory.cooldown_until
    );
    assert!(!world.events_of(EventReason::Promoted).is_empty());
    world.run_polls(3);
    assert_eq!(world.writable_sites(), vec!["pdx".to_string()]);
    assert!(world.split_brain_at.is_empty());
}

#[test]
fn issue_10_case_7_a_poll_no_sidecar_answers_vouches_for_nothing() {
    // Simulator seed 693 (`--all-faults --state-loss --status-revert`): pdx was promoted at
    // generation 2; the status reverted to iad at generation 1; iad and the reader are down
    // and pdx's sidecar restarted, so nothing answering caches an authority and the operator
    // withholds memory's. One poll's every read then fails while its pushes land. Taking "no
    // sidecar answers" for "no sidecar contradicts memory" pushed iad at 1 to pdx; pdx cached
    // it, vouched for memory on the next poll, and was repointed to iad with its own
    // generation-2 writes off the history.
    let (mut world, reverted) = promoted_pdx_and_memory_before();
    world.kill("iad");
    world.kill("reader");
    world.restart_sidecar("pdx");
    world.memory = reverted;
    world.run_polls(3);
    assert!(
        world.site("pdx").authority.is_none(),
        "an authority was issued on memory's word alone: {:?}",
        world.site("pdx").authority
    );
    assert!(!world.events_of(EventReason::AuthorityWithheld).is_empty());
    let first = world.decisions.len();
    world.poll_with_failed_reads();
    world.run_polls(3);
    assert_eq!(
        issued_since(&world, first),
        Vec::new(),
        "authority issued with no sidecar vouching for it"
    );
    assert!(world.site("pdx").authority.is_none());
    assert!(world.split_brain_at.is_empty());
}

#[test]
fn a_demoted_active_site_holding_every_transaction_takes_the_authority_back() {
    // Simulator seed 1468 (`--all-faults`): an operator crash lost the emergency failover
    // that demoted the active site; it reads back demoted (`role=fenced` in the status), no
    // sidecar caches an authority to vouch for memory, and the other read-write site lacks a
    // transaction it holds. No other site can take over without losing it: the demoted site
    // takes the authority back at a new generation, the last resort an emergency failover
    // with no other candidate also takes. Withholding kept every site read-only for good.
    use bloodraven_core::engine::SiteState;
    let mut world = World::bootstrapped();
    world.site_mut("pdx").running = false;
    world.site_mut("reader").running = false;
    assert!(world.write("iad"));
    world.site_mut("iad").read_only = true;
    for site in ["iad", "pdx", "reader"] {
        world.restart_sidecar(site);
    }
    world.memory.emergency_failover = None;
    world.memory.site_mut("iad").expect("iad").state = SiteState::Demoted;
    let generation = world.memory.topology_generation;
    world.advance(world.spec.failover_cooldown.get());
    world.run_polls(10);
    assert_eq!(world.memory.active_site, "iad");
    assert!(
        world.memory.topology_generation > generation,
        "{:?}",
        world.memory.topology_generation
    );
    assert_eq!(world.writable_sites(), vec!["iad".to_string()]);
    assert!(
        world.memory.authority.is_valid(),
        "{:?}",
        world.memory.authority
    );
}
