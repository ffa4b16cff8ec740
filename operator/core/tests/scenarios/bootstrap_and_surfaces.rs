//! Core scenarios: bootstrap, labels, Services and the DNSEndpoint (docs/design/requirements.md
//! R000.1-R000.13).

use crate::support::{labels_of, World};
use bloodraven_api::names;
use bloodraven_core::engine::{Action, DnsReading, EventReason, PodRole, ServiceKind};

#[test]
fn bootstrap_issues_generation_1_and_iad_becomes_primary() {
    // docs/design/requirements.md R003.19: bootstrap completion is an authoritative change
    // (topologyGeneration 0 -> 1); docs/design/operator.md#per-site-health-and-labels:
    // role=primary only on the active site while authority is valid.
    let world = World::bootstrapped();
    assert_eq!(world.memory.topology_generation, 1);
    assert_eq!(world.memory.active_site, "iad");
    assert_eq!(world.writable_sites(), vec!["iad".to_string()]);
    let (_, last) = world.decisions.last().unwrap();
    assert_eq!(labels_of(last, "iad"), Some((PodRole::Primary, true)));
    assert_eq!(labels_of(last, "pdx"), Some((PodRole::Replica, true)));
    assert_eq!(labels_of(last, "reader"), Some((PodRole::Replica, true)));
    assert_eq!(world.events_of(EventReason::AuthorityIssued).len(), 1);
}

/// A first start initialises the datadir: the initial active site's mysqld may answer only
/// after several polls. Nothing is issued until it does, and it is not "failed" over meanwhile
/// (seen live: authority issued at once, iad failed three polls later, pdx promoted).
#[test]
fn bootstrap_waits_for_the_initial_active_site_and_never_fails_it_over_before() {
    let mut world = World::playground();
    world.site_mut("iad").mysql_up = false;
    world.run_polls(6);
    assert_eq!(world.memory.topology_generation, 0);
    assert!(world.events_of(EventReason::AuthorityIssued).is_empty());
    assert!(world
        .events_of(EventReason::EmergencyFailoverStarted)
        .is_empty());
    assert!(!world.events_of(EventReason::AuthorityWithheld).is_empty());
    assert!(world.writable_sites().is_empty());
    world.site_mut("iad").mysql_up = true;
    world.run_polls(4);
    assert_eq!(world.memory.topology_generation, 1);
    assert_eq!(world.memory.active_site, "iad");
    assert_eq!(world.writable_sites(), vec!["iad".to_string()]);
    world.run_polls(6);
    assert!(world
        .events_of(EventReason::EmergencyFailoverStarted)
        .is_empty());
}

#[test]
fn seed_000_four_service_kinds_two_per_site_plus_two_with_exact_selectors() {
    let world = World::bootstrapped();
    let (_, last) = world.decisions.last().unwrap();
    let services: Vec<_> = last
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::ApplyService(s) => Some(s.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        services.len(),
        2 * 3 + 2,
        "2 × len(sites) + 2 = 8 objects for playground"
    );
    let primary = services
        .iter()
        .find(|s| s.kind == ServiceKind::Primary)
        .unwrap();
    assert_eq!(primary.name, "mysql-playground-primary");
    assert_eq!(primary.selector.len(), 2, "-primary has exactly two labels");
    assert_eq!(primary.selector[names::LABEL_INSTANCE], "playground");
    assert_eq!(primary.selector[names::LABEL_ROLE], "primary");
    assert!(!primary.selector.contains_key(names::LABEL_HEALTHY));
    assert!(!primary.publish_not_ready_addresses);
    let replicas = services
        .iter()
        .find(|s| s.kind == ServiceKind::Replicas)
        .unwrap();
    assert_eq!(replicas.name, "mysql-playground-replicas");
    assert_eq!(
        replicas.selector.len(),
        3,
        "-replicas has exactly three labels"
    );
    assert_eq!(replicas.selector[names::LABEL_ROLE], "replica");
    assert_eq!(replicas.selector[names::LABEL_HEALTHY], "yes");
    let internal = services
        .iter()
        .find(|s| s.kind == ServiceKind::SiteInternal && s.site.as_deref() == Some("iad"))
        .unwrap();
    assert_eq!(internal.name, "mysql-playground-iad");
    assert!(internal.publish_not_ready_addresses);
    assert!(internal.ports.contains(&("mysql".to_string(), 3306)));
    assert!(internal.ports.contains(&("sidecar".to_string(), 8086)));
    let headless = services
        .iter()
        .find(|s| s.kind == ServiceKind::SiteHeadless && s.site.as_deref() == Some("pdx"))
        .unwrap();
    assert_eq!(headless.name, "mysql-playground-pdx-hl");
    assert!(headless.headless);
}

#[test]
fn seed_000_dns_a_record_points_at_active_internal_service_ip_and_applies_only_on_divergence() {
    let mut world = World::bootstrapped();
    let spec = world
        .dns
        .clone()
        .expect("DNSEndpoint applied once the authority is valid");
    let endpoint = &spec.endpoints[0];
    assert_eq!(endpoint.dns_name, "playground-db.example.local");
    assert_eq!(endpoint.record_type, "A");
    assert_eq!(endpoint.record_ttl, Some(10));
    assert_eq!(endpoint.targets, vec![world.site("iad").cluster_ip.clone()]);
    // Live record equal: no apply.
    let decision = world.poll();
    assert!(!decision
        .actions
        .iter()
        .any(|a| matches!(a, Action::ApplyDnsEndpoint { .. })));
    // Hand-edited target: corrected on the next poll (scenario 039).
    world.dns.as_mut().unwrap().endpoints[0].targets = vec!["10.0.0.99".to_string()];
    let decision = world.poll();
    assert!(decision
        .actions
        .iter()
        .any(|a| matches!(a, Action::ApplyDnsEndpoint { .. })));
    assert_eq!(
        world.dns.as_ref().unwrap().endpoints[0].targets,
        vec![world.site("iad").cluster_ip.clone()]
    );
}

#[test]
fn seed_000_dns_read_failure_is_unknown_and_reapplies_the_desired_record() {
    let world = World::bootstrapped();
    let mut observation = world.observe();
    observation.dns = DnsReading::Unknown {
        error: "timeout".to_string(),
    };
    let decision = bloodraven_core::decide(&world.spec, &world.memory, &observation, world.now);
    assert!(decision
        .actions
        .iter()
        .any(|a| matches!(a, Action::ApplyDnsEndpoint { .. })));
}

#[test]
fn seed_000_invalid_authority_sheds_every_endpoint_no_primary_no_healthy_reader() {
    let mut world = World::bootstrapped();
    // iad's mysqld restarted read-only: authority invalid this poll.
    world.site_mut("iad").mysql_up = true;
    world.site_mut("iad").authority = None;
    world.site_mut("iad").lease_until = None;
    world.site_mut("iad").read_only = true;
    let decision = world.poll();
    assert!(!decision.memory.authority.is_valid());
    for site in ["iad", "pdx", "reader"] {
        let (role, healthy) = labels_of(&decision, site).unwrap();
        assert_ne!(
            role,
            PodRole::Primary,
            "{site} must not be primary under invalid authority"
        );
        assert!(
            !healthy,
            "{site} must not be healthy under invalid authority"
        );
    }
    assert!(!decision
        .actions
        .iter()
        .any(|a| matches!(a, Action::ApplyDnsEndpoint { .. })));
}

#[test]
fn an_invalid_spec_decides_nothing_but_a_spec_invalid_event() {
    // docs/design/history.md#issue-2 /
    // docs/design/style.md#4-assertions-for-invariants-result-for-the-world: an unusable spec
    // is a typed operating error, never a guess at authority.
    let mut world = World::playground();
    world.spec.initial_active_site = "reader".to_string();
    let decision = world.poll();
    assert_eq!(decision.actions.len(), 1);
    match &decision.actions[0] {
        Action::Event(event) => {
            assert_eq!(event.reason, EventReason::SpecInvalid);
            assert!(event.message.contains("read-only"), "{}", event.message);
        }
        other => panic!("unexpected action {other:?}"),
    }
    assert_eq!(decision.memory.topology_generation, 0);
}
