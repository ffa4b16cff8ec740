//! The group's standard `status.conditions` (docs/design/operator.md#mysqlfailovergroup),
//! derived purely from [`GroupMemory`] after each decision.
//!
//! | type | `True` when | reasons |
//! |---|---|---|
//! | `Ready` | the authority is valid: a confirmed writable active site | `AuthorityValid`; else the `status.authority.reason` (`Moving`, `ActiveNotWritable`, ...) |
//! | `Degraded` | two sites writable, a site unreachable or failed, a former primary kept fenced, or a replica not replicating | `SplitBrain`, `SitesUnreachable`, `ReturningPrimaryFenced`, `ReplicationNotRunning`; `AllSitesHealthy` |
//! | `FailoverInProgress` | an emergency failover, a promotion not yet confirmed, or a planned failover in a non-final phase | `EmergencyFailover`, `PromotionUnconfirmed`, `PlannedFailover<Phase>`; `NoFailover` |
//! | `Stable` | the deploy API would answer `stable: true` ([`unstable_reason`]) | `Stable`; else the `unstableReason` |
//! | `SpecValid` | `MysqlFailoverGroupSpec::validate` finds no problem ([`spec_valid`]) | `SpecValid`; `SpecInvalid`, the message naming every field |
//!
//! While the spec is invalid `decide` decides nothing and keeps memory as it was: the first
//! four conditions stay as the last valid spec left them, and only `SpecValid` changes.
//!
//! `lastTransitionTime` changes only when a condition's `status` flips; a new reason or
//! message under the same status keeps it.

use bloodraven_api::{Condition, PlannedFailoverPhase};

use super::memory::{AuthorityValidity, Detection, EmergencyPhase, GroupMemory};
use super::stability::{degraded_sites, not_replicating_sites, unstable_reason, writable_sites};
use crate::time::Timestamp;

/// Condition type: there is a confirmed writable active site.
pub const CONDITION_READY: &str = "Ready";
/// Condition type: some site is not serving as it should.
pub const CONDITION_DEGRADED: &str = "Degraded";
/// Condition type: an authority move (emergency or planned failover) is under way.
pub const CONDITION_FAILOVER_IN_PROGRESS: &str = "FailoverInProgress";
/// Condition type: the deploy API's `stable` (docs/design/requirements.md R003.9).
pub const CONDITION_STABLE: &str = "Stable";
/// Condition type: the spec is usable (docs/design/operator.md#mysqlfailovergroup, "An invalid
/// spec builds nothing and says so"); `kubectl get mfg` shows its status.
pub const CONDITION_SPEC_VALID: &str = "SpecValid";
/// Reason of `SpecValid=False` (also the reason of the Warning Event raised with it).
pub const REASON_SPEC_INVALID: &str = "SpecInvalid";

/// The conditions of `memory` at `now`, in a fixed order (Ready, Degraded,
/// FailoverInProgress, Stable). `previous` supplies the transition times to keep: a
/// condition whose status is unchanged keeps its `lastTransitionTime`.
pub fn conditions(memory: &GroupMemory, previous: &[Condition], now: Timestamp) -> Vec<Condition> {
    [
        ready(memory),
        degraded(memory),
        failover_in_progress(memory),
        stable(memory),
    ]
    .into_iter()
    .map(|mut condition| {
        condition.last_transition_time = transition_time(&condition, previous, now);
        condition
    })
    .collect()
}

/// The `SpecValid` condition for the problems `MysqlFailoverGroupSpec::validate` found
/// (none: `True`), its `lastTransitionTime` kept from `previous` when its status is unchanged.
pub fn spec_valid(problems: &[String], previous: &[Condition], now: Timestamp) -> Condition {
    let mut condition = if problems.is_empty() {
        condition(
            CONDITION_SPEC_VALID,
            true,
            "SpecValid",
            "every field of the spec is usable".to_string(),
        )
    } else {
        condition(
            CONDITION_SPEC_VALID,
            false,
            REASON_SPEC_INVALID,
            problems.join("; "),
        )
    };
    condition.last_transition_time = transition_time(&condition, previous, now);
    condition
}

/// `condition` in `conditions`: replaces the one of its type, or is appended.
pub fn set_condition(conditions: &mut Vec<Condition>, condition: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        Some(slot) => *slot = condition,
        None => conditions.push(condition),
    }
}

/// The `lastTransitionTime` of `condition` at `now`: kept from `previous` when its status is
/// unchanged.
fn transition_time(
    condition: &Condition,
    previous: &[Condition],
    now: Timestamp,
) -> Option<Timestamp> {
    match previous.iter().find(|c| c.type_ == condition.type_) {
        Some(before) if before.status == condition.status => {
            before.last_transition_time.or(Some(now))
        }
        Some(_) | None => Some(now),
    }
}

fn condition(type_: &str, status: bool, reason: &str, message: String) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: if status { "True" } else { "False" }.to_string(),
        reason: reason.to_string(),
        message,
        last_transition_time: None,
    }
}

fn ready(memory: &GroupMemory) -> Condition {
    match &memory.authority {
        AuthorityValidity::Valid => condition(
            CONDITION_READY,
            true,
            "AuthorityValid",
            format!(
                "{} is confirmed writable at topology generation {}",
                memory.active_site, memory.topology_generation
            ),
        ),
        AuthorityValidity::Invalid(reason) => condition(
            CONDITION_READY,
            false,
            reason.as_str(),
            format!(
                "no confirmed writable active site ({}); both shared Services select nothing",
                memory.active_site
            ),
        ),
    }
}

fn degraded(memory: &GroupMemory) -> Condition {
    let writable = writable_sites(memory);
    if writable.len() > 1 {
        return condition(
            CONDITION_DEGRADED,
            true,
            "SplitBrain",
            format!("sites read writable at once: {}", writable.join(", ")),
        );
    }
    let degraded = degraded_sites(memory);
    let unreachable: Vec<&str> = degraded
        .iter()
        .filter(|site| !site.reachable || site.detection == Detection::Failed)
        .map(|site| site.site.as_str())
        .collect();
    if !unreachable.is_empty() {
        return condition(
            CONDITION_DEGRADED,
            true,
            "SitesUnreachable",
            format!("unreachable or failed: {}", unreachable.join(", ")),
        );
    }
    let fenced: Vec<String> = degraded
        .iter()
        .map(|site| {
            let errant = site
                .errant
                .as_ref()
                .filter(|errant| !errant.is_empty())
                .map(|errant| format!("{} errant transactions", errant.count()));
            let rejoin = site
                .rejoin
                .as_ref()
                .map(|rejoin| format!("rejoin {:?}", rejoin.status.phase));
            let detail: Vec<String> = [errant, rejoin].into_iter().flatten().collect();
            if detail.is_empty() {
                site.site.clone()
            } else {
                format!("{} ({})", site.site, detail.join(", "))
            }
        })
        .collect();
    if !fenced.is_empty() {
        return condition(
            CONDITION_DEGRADED,
            true,
            "ReturningPrimaryFenced",
            format!("former primary kept fenced: {}", fenced.join(", ")),
        );
    }
    let stopped = not_replicating_sites(memory);
    if !stopped.is_empty() {
        return condition(
            CONDITION_DEGRADED,
            true,
            "ReplicationNotRunning",
            format!("replication not running on: {}", stopped.join(", ")),
        );
    }
    condition(CONDITION_DEGRADED, false, "AllSitesHealthy", String::new())
}

fn failover_in_progress(memory: &GroupMemory) -> Condition {
    if let Some(failover) = &memory.emergency_failover {
        let phase = match &failover.phase {
            EmergencyPhase::AwaitingLeaseExpiry => {
                "awaiting the old write lease's expiry".to_string()
            }
            EmergencyPhase::CatchingUp { to, source, .. } => {
                format!("{to} fetching from {source} the transactions only {source} holds")
            }
            EmergencyPhase::Draining { to, .. } => format!("{to} draining its relay log"),
            EmergencyPhase::Promoting { to } => {
                format!("{to} promoted, not yet confirmed writable")
            }
        };
        return condition(
            CONDITION_FAILOVER_IN_PROGRESS,
            true,
            "EmergencyFailover",
            format!("emergency failover from {}: {phase}", failover.from),
        );
    }
    let planned = memory.planned_failover.as_ref().and_then(|planned| {
        let (reason, phase) = match planned.phase {
            PlannedFailoverPhase::Admitting => ("PlannedFailoverAdmitting", "Admitting"),
            PlannedFailoverPhase::Deferred => ("PlannedFailoverDeferred", "Deferred"),
            PlannedFailoverPhase::Draining => ("PlannedFailoverDraining", "Draining"),
            PlannedFailoverPhase::Promoting => ("PlannedFailoverPromoting", "Promoting"),
            PlannedFailoverPhase::Completed | PlannedFailoverPhase::Rejected => return None,
        };
        Some((reason, phase, planned.target.as_str()))
    });
    if let Some((reason, phase, target)) = planned {
        return condition(
            CONDITION_FAILOVER_IN_PROGRESS,
            true,
            reason,
            format!("planned failover to {target}: phase {phase}"),
        );
    }
    if let Some(failover) = memory
        .last_failover
        .as_ref()
        .filter(|failover| failover.completed_at.is_none())
    {
        return condition(
            CONDITION_FAILOVER_IN_PROGRESS,
            true,
            "PromotionUnconfirmed",
            format!("{} promoted, not yet confirmed writable", failover.to),
        );
    }
    condition(
        CONDITION_FAILOVER_IN_PROGRESS,
        false,
        "NoFailover",
        String::new(),
    )
}

fn stable(memory: &GroupMemory) -> Condition {
    match unstable_reason(memory) {
        None => condition(CONDITION_STABLE, true, "Stable", String::new()),
        Some(reason) => condition(
            CONDITION_STABLE,
            false,
            reason.as_str(),
            "deploy leases see stable=false".to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::memory::{InvalidReason, SiteState};
    use bloodraven_api::MysqlFailoverGroupSpec;

    fn spec() -> MysqlFailoverGroupSpec {
        serde_json::from_str(
            r#"{"flavor": "mariadb", "image": "mariadb:10.11", "initialActiveSite": "iad",
                "sites": [{"name": "iad", "role": "read-write"},
                          {"name": "pdx", "role": "read-write"},
                          {"name": "reader", "role": "read-only"}]}"#,
        )
        .expect("spec parses")
    }

    fn healthy() -> GroupMemory {
        let mut memory = GroupMemory::initial(&spec());
        memory.topology_generation = 1;
        memory.authority = AuthorityValidity::Valid;
        for site in &mut memory.sites {
            site.reachable = true;
            site.writable = site.site == "iad";
            site.replicating = site.site != "iad";
        }
        memory
    }

    fn find<'a>(conditions: &'a [Condition], type_: &str) -> &'a Condition {
        conditions
            .iter()
            .find(|c| c.type_ == type_)
            .expect("condition present")
    }

    #[test]
    fn bloodraven_md_status_conditions_of_a_healthy_group() {
        let conditions = conditions(&healthy(), &[], Timestamp(1_000));
        let types: Vec<&str> = conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(
            types,
            [
                CONDITION_READY,
                CONDITION_DEGRADED,
                CONDITION_FAILOVER_IN_PROGRESS,
                CONDITION_STABLE
            ]
        );
        assert_eq!(find(&conditions, CONDITION_READY).status, "True");
        assert_eq!(find(&conditions, CONDITION_DEGRADED).status, "False");
        assert_eq!(
            find(&conditions, CONDITION_FAILOVER_IN_PROGRESS).status,
            "False"
        );
        assert_eq!(find(&conditions, CONDITION_STABLE).status, "True");
        assert!(conditions
            .iter()
            .all(|c| c.last_transition_time == Some(Timestamp(1_000))));
    }

    #[test]
    fn last_transition_time_changes_only_when_the_status_flips() {
        let first = conditions(&healthy(), &[], Timestamp(1_000));
        // Same statuses, new reason/message for Ready? No: same memory, later poll.
        let second = conditions(&healthy(), &first, Timestamp(2_000));
        assert_eq!(first, second);
        let mut invalid = healthy();
        invalid.authority = AuthorityValidity::Invalid(InvalidReason::ActiveUnreachable);
        let third = conditions(&invalid, &second, Timestamp(3_000));
        let ready = find(&third, CONDITION_READY);
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "ActiveUnreachable")
        );
        assert_eq!(ready.last_transition_time, Some(Timestamp(3_000)));
        assert_eq!(
            find(&third, CONDITION_DEGRADED).last_transition_time,
            Some(Timestamp(1_000)),
            "unchanged status keeps its time"
        );
        // A new reason under the same status keeps the time.
        invalid.authority = AuthorityValidity::Invalid(InvalidReason::ActiveMysqlDown);
        let fourth = conditions(&invalid, &third, Timestamp(4_000));
        let ready = find(&fourth, CONDITION_READY);
        assert_eq!(ready.reason, "ActiveMysqlDown");
        assert_eq!(ready.last_transition_time, Some(Timestamp(3_000)));
    }

    #[test]
    fn degraded_names_unreachable_sites_and_fenced_former_primaries() {
        let mut memory = healthy();
        memory.sites[2].reachable = false;
        let conditions = conditions(&memory, &[], Timestamp(0));
        let degraded = find(&conditions, CONDITION_DEGRADED);
        assert_eq!(
            (degraded.status.as_str(), degraded.reason.as_str()),
            ("True", "SitesUnreachable")
        );
        assert!(degraded.message.contains("reader"));
        let stable = find(&conditions, CONDITION_STABLE);
        assert_eq!(
            (stable.status.as_str(), stable.reason.as_str()),
            ("False", "Degraded")
        );

        let mut fenced = healthy();
        fenced.sites[1].state = SiteState::Demoted;
        let conditions = super::conditions(&fenced, &[], Timestamp(0));
        assert_eq!(
            find(&conditions, CONDITION_DEGRADED).reason,
            "ReturningPrimaryFenced"
        );
    }
}
