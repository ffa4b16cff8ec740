//! Convergence, every poll while no move is in flight: the authority pushed to every site,
//! every serving replica pointed at the active site with its errant set recorded, and
//! returning primaries (demoted old active sites) fenced until they have no errant
//! transactions, then rejoining as replicas.

use bloodraven_api::{
    names,
    sidecar::{Authority, RepointRequest},
};
use bloodraven_mysql::{errant_transactions, lost_transactions, same_host, GtidSet};

use super::authority::{current_authority, moving, source_host_of};
use crate::engine::action::{Action, EventReason, MetricObservation};
use crate::engine::memory::{GroupMemory, SiteState};
use crate::engine::options::DRAIN_TIMEOUT;
use crate::engine::plan::{Context, Plan};

/// Returning-primary fencing: a demoted site stays `role=fenced` until it is readable, its
/// errant transactions against the active site are computed (and, for the old primary of
/// the last failover, make `lostTransactions` exact), and it has none; then it rejoins as a
/// replica (taint removed, repointed). Never reads a deploy lease.
pub(in crate::engine) fn returning_primaries(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
    authority_valid: bool,
) {
    if moving(memory) {
        return;
    }
    let active = memory.active_site.clone();
    let Some(active_gtid) = context.view(&active).gtid.clone() else {
        return;
    };
    let demoted: Vec<String> = memory
        .sites
        .iter()
        .filter(|site| site.state == SiteState::Demoted)
        .map(|site| site.site.clone())
        .collect();
    for name in demoted {
        returning_primary(
            context,
            memory,
            plan,
            &name,
            &active,
            &active_gtid,
            authority_valid,
        );
    }
}

/// One demoted site `name`, once readable: its errant set against the active site recorded,
/// the last failover's loss made exact, and the site rejoined (with a valid authority) or
/// kept fenced.
fn returning_primary(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
    name: &str,
    active: &str,
    active_gtid: &GtidSet,
    authority_valid: bool,
) {
    let view = context.view(name);
    let Some(gtid) = view.gtid.clone() else {
        return;
    };
    let errant = errant_of(context, memory, name, &gtid, active_gtid);
    let baseline = crate::engine::restore::loss_baseline(context, memory, active_gtid);
    make_lost_exact(memory, plan, name, active, &gtid, &baseline);
    let previously = memory.site(name).and_then(|site| site.errant.clone());
    if let Some(site) = memory.site_mut(name) {
        site.errant = Some(errant.clone());
    }
    // A rejoin holds the site (archiving, re-seeding, or past its archive and not rejoined):
    // only the rejoin's completion makes it a replica, once it replicates directly from the
    // active site. A re-seed's load empties the errant set before replication is pointed
    // anywhere (`engine::rejoin`).
    if crate::engine::rejoin::holds(context, memory, name) {
        return;
    }
    if errant.is_empty() {
        if authority_valid {
            if let Some(role) = context.role(name) {
                let node = view.node_name.clone();
                plan.transition(memory, name, role, node.as_deref(), SiteState::Replica);
            }
            plan.event(
                EventReason::ReturningPrimaryRejoined,
                format!("{name} has no errant transactions; rejoins as a replica of {active}"),
            );
        }
    } else if previously.as_ref() != Some(&errant) {
        plan.event(
            EventReason::ReturningPrimaryFenced,
            format!(
                "{name} stays fenced: {} errant transactions against {active}: {errant}",
                errant.count()
            ),
        );
    }
}

/// What the demoted site `name` (read at `gtid`) holds that the active site (read at
/// `active_gtid`) lacks: its errant transactions, its copy of what a restore discarded after
/// its demotion included.
pub(in crate::engine) fn errant_of(
    context: &Context<'_>,
    memory: &GroupMemory,
    name: &str,
    gtid: &GtidSet,
    active_gtid: &GtidSet,
) -> GtidSet {
    let errant = errant_transactions(gtid, active_gtid);
    // Its copy of what a restore discarded after its demotion is errant, also under GTIDs
    // the restored site has reused since (simulator seed 1663 with every fault mode).
    match crate::engine::restore::pre_restore_copy(context, memory, name, gtid) {
        Some(copy) => errant.union(&copy),
        None => errant,
    }
}

/// The last failover's `lostTransactions` made exact from the readable old primary `site`:
/// what `old_gtid` holds that `new_gtid` lacks.
fn make_lost_exact(
    memory: &mut GroupMemory,
    plan: &mut Plan,
    site: &str,
    active: &str,
    old_gtid: &GtidSet,
    new_gtid: &GtidSet,
) {
    let Some(record) = memory.last_failover.as_mut() else {
        return;
    };
    if record.from != site || record.to != active || record.completed_at.is_none() {
        return;
    }
    let lost = lost_transactions(old_gtid, new_gtid);
    let counted = record.lost_transactions;
    // Exact as of the latest reading: a thawed old primary can still commit a transaction it
    // had received before it froze (its client timed out, the commit lands after the
    // promotion). The count follows the set as it grows; it never shrinks.
    if record.exact && lost.count() <= counted {
        return;
    }
    let grew = record.exact;
    record.lost_transactions = lost.count();
    record.lost_gtid_set = Some(lost.to_string());
    record.exact = true;
    if lost.count() > counted {
        plan.tail(Action::Metric(MetricObservation::LostTransactions {
            count: lost.count() - counted,
        }));
    }
    let how = if grew {
        "committed after it was read"
    } else {
        "readable again"
    };
    plan.event(
        EventReason::LostTransactionsExact,
        format!(
            "{site} {how}: the failover lost exactly {} transactions",
            lost.count()
        ),
    );
}

/// Every-poll convergence: the move notice while a move is in flight, else the authority
/// pushed to every site and every serving replica pointed at the active site; replicas'
/// errant sets recorded while the active site is readable.
pub(in crate::engine) fn converge(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
) {
    if moving(memory) {
        return;
    }
    // A sidecar caches a newer generation than memory (a move announced by a planned failover
    // this poll found stale and dropped): pushing memory's would issue a lower generation than
    // a sidecar reports. The next poll adopts or resumes what the sidecars cache. Likewise
    // while a generation memory could not adopt lies above its own.
    if memory.topology_generation < plan.generation_floor()
        || memory.unadopted_generation > memory.topology_generation
    {
        return;
    }
    push_authority(context, memory, plan);
    repoint_replicas(context, memory, plan);
}

/// The authority naming the active site, to every site's sidecar.
fn push_authority(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    let issued_at = *memory.authority_issued_at.get_or_insert(context.now);
    let authority = Authority {
        issued_at,
        ..current_authority(context, memory)
    };
    for site in context.site_names() {
        plan.cross_site(Action::PushAuthority {
            site: site.to_string(),
            authority: authority.clone(),
        });
    }
}

/// Every reachable replica (not withheld by a restore): its errant set against the active
/// site recorded, and repointed at the active site unless it already replicates from it.
fn repoint_replicas(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    let active = memory.active_site.clone();
    let active_gtid = context.view(&active).gtid.clone();
    for name in context.site_names() {
        let Some(entry) = memory.site(name) else {
            continue;
        };
        if name == active
            || entry.state != SiteState::Replica
            || crate::engine::restore::withholds(memory, name)
        {
            continue;
        }
        let view = context.view(name);
        if !view.is_up() {
            continue;
        }
        if let (Some(gtid), Some(active_gtid)) = (&view.gtid, &active_gtid) {
            let errant = errant_transactions(gtid, active_gtid);
            if let Some(site) = memory.site_mut(name) {
                site.errant = Some(errant);
            }
        }
        if !replicates_from(context, name, &active) {
            plan.cross_site(repoint_action(context, name, &active));
            plan.event(
                EventReason::Repointed,
                format!("{name} replicates from {active}"),
            );
        }
    }
}

/// Whether `site` replicates from `source` now.
pub(in crate::engine) fn replicates_from(context: &Context<'_>, site: &str, source: &str) -> bool {
    let host = source_host_of(context, source);
    context
        .view(site)
        .replication
        .as_ref()
        .and_then(|replication| replication.source_host.as_deref())
        .is_some_and(|current| same_host(current, &host, &context.observation.namespace))
}

/// `POST /v1/repoint` of `site` to `source`'s internal Service (the relay log is discarded:
/// what it holds from an old primary may be missing on the new source).
pub(in crate::engine) fn repoint_action(context: &Context<'_>, site: &str, source: &str) -> Action {
    Action::Repoint {
        site: site.to_string(),
        request: RepointRequest {
            group: context.group().to_string(),
            source_host: source_host_of(context, source),
            source_port: names::PORT_MYSQL,
            drain_received_ms: None,
        },
    }
}

/// An emergency failover's catch-up: `candidate` replicates from the peer `source`, after
/// applying everything it already received from the dead primary ([`DRAIN_TIMEOUT`] at
/// most). A plain repoint would discard the candidate's relay log, and with it writes no
/// other site may hold.
pub(in crate::engine) fn catch_up_action(
    context: &Context<'_>,
    candidate: &str,
    source: &str,
) -> Action {
    Action::Repoint {
        site: candidate.to_string(),
        request: RepointRequest {
            group: context.group().to_string(),
            source_host: source_host_of(context, source),
            source_port: names::PORT_MYSQL,
            drain_received_ms: Some(u64::try_from(DRAIN_TIMEOUT.as_millis()).unwrap_or(u64::MAX)),
        },
    }
}
