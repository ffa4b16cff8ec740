use bloodraven_api::{MysqlFailoverGroupSpec, PlannedFailoverPhase};

use super::*;
use crate::engine::memory::PlannedFailover;

fn spec() -> MysqlFailoverGroupSpec {
    serde_json::from_str(
        r#"{"flavor": "mariadb", "image": "mariadb:10.11", "initialActiveSite": "iad",
            "sites": [{"name": "iad", "role": "read-write"},
                      {"name": "pdx", "role": "read-write"},
                      {"name": "reader", "role": "read-only"}]}"#,
    )
    .expect("spec parses")
}

fn update(phase: OrderedUpdatePhase) -> OrderedUpdate {
    OrderedUpdate {
        target_image: "mariadb:new".to_string(),
        phase,
        current_site: Some("iad".to_string()),
        failover_from: Some("iad".to_string()),
        failover_target: Some("pdx".to_string()),
        admission: Admission::default(),
        message: Some("m".to_string()),
        started_at: Timestamp(1_000),
        step_since: Timestamp(5_000),
        sites: vec![OrderedUpdateSite {
            name: "iad".to_string(),
            image: Some("mariadb:old".to_string()),
            updated: false,
        }],
    }
}

fn planned(phase: PlannedFailoverPhase, requested_at: i64, cleared: bool) -> PlannedFailover {
    PlannedFailover {
        target: "pdx".to_string(),
        from: "iad".to_string(),
        phase,
        admission: Admission::default(),
        requested_at: Timestamp(requested_at),
        phase_since: Timestamp(requested_at),
        fenced_at: None,
        annotation_cleared: cleared,
    }
}

/// docs/design/history.md#issue-12: the update survives an operator restart: every field it
/// resumes from is in the status, the step clock included.
#[test]
fn issue_12_status_round_trip_keeps_the_update() {
    let mut memory = GroupMemory::initial(&spec());
    memory.topology_generation = 3;
    memory.ordered_update = Some(update(OrderedUpdatePhase::FailingOver));
    let status = memory.to_status();
    let restored = GroupMemory::from_status(&spec(), Some(&status), Timestamp(99_000));
    assert_eq!(restored.ordered_update, memory.ordered_update);
}

/// Only `FailingOver` requests a planned failover, and not while a finished planned failover
/// to the same target, older than the step, still waits for its request to be seen withdrawn.
#[test]
fn issue_12_only_failing_over_requests_the_planned_failover() {
    let phases = [
        OrderedUpdatePhase::Admitting,
        OrderedUpdatePhase::Deferred,
        OrderedUpdatePhase::RollingReplica,
        OrderedUpdatePhase::FailingOver,
        OrderedUpdatePhase::RollingOldActive,
        OrderedUpdatePhase::Completed,
        OrderedUpdatePhase::Failed,
    ];
    for phase in phases {
        let mut memory = GroupMemory::initial(&spec());
        memory.ordered_update = Some(update(phase));
        let expected = (phase == OrderedUpdatePhase::FailingOver).then(|| "pdx".to_string());
        assert_eq!(failover_request(&memory), expected, "{phase:?}");
    }
    let mut memory = GroupMemory::initial(&spec());
    memory.ordered_update = Some(update(OrderedUpdatePhase::FailingOver));
    memory.planned_failover = Some(planned(PlannedFailoverPhase::Completed, 1_000, false));
    assert_eq!(failover_request(&memory), None, "an older finished request");
    memory.planned_failover = Some(planned(PlannedFailoverPhase::Completed, 1_000, true));
    assert_eq!(failover_request(&memory), Some("pdx".to_string()));
    memory.planned_failover = Some(planned(PlannedFailoverPhase::Completed, 6_000, false));
    assert_eq!(
        failover_request(&memory),
        Some("pdx".to_string()),
        "its own"
    );
}

/// The in-flight phases are exactly the non-final ones; only the two rolling phases name a
/// site being recreated.
#[test]
fn issue_12_in_flight_and_rolling_phases() {
    for (phase, in_flight, rolling) in [
        (OrderedUpdatePhase::Admitting, true, false),
        (OrderedUpdatePhase::Deferred, true, false),
        (OrderedUpdatePhase::RollingReplica, true, true),
        (OrderedUpdatePhase::FailingOver, true, false),
        (OrderedUpdatePhase::RollingOldActive, true, true),
        (OrderedUpdatePhase::Completed, false, false),
        (OrderedUpdatePhase::Failed, false, false),
    ] {
        let update = update(phase);
        assert_eq!(update.in_flight(), in_flight, "{phase:?}");
        assert_eq!(update.rolling().is_some(), rolling, "{phase:?}");
    }
}
