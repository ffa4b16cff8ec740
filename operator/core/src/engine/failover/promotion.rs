//! Promotion, shared by emergency and planned failover: the `Promote` that drains and
//! detaches the candidate, issuing the new authority to it (generation, cooldown,
//! `lastFailover`, deploy leases revoked), and completing the promotion once the new active
//! site is confirmed writable (lost transactions re-measured, metrics).

use bloodraven_api::{
    sidecar::{PromoteDrain, PromoteRequest},
    FailoverKind, LastFailover,
};
use bloodraven_mysql::{lost_transactions, same_host, GtidSet};

use super::authority::source_host_of;
use crate::deploy::RevokeReason;
use crate::engine::action::{Action, AnnotationChange, EventReason, MetricObservation};
use crate::engine::memory::{GroupMemory, SiteState};
use crate::engine::note::{kind_name, FailoverNote};
use crate::engine::options::DRAIN_TIMEOUT;
use crate::engine::plan::{Context, Plan};
use crate::engine::reading::mysql_flavor;
use crate::time::Timestamp;

/// `POST /v1/promote` for `site`, applying `drain` first within [`DRAIN_TIMEOUT`]: an
/// emergency drains everything the candidate received ([`PromoteDrain::Received`],
/// docs/design/requirements.md R001.8: the RPO is what had replicated, so a received but
/// unapplied transaction is not given up), a planned failover the old primary's GTID set
/// ([`PromoteDrain::UntilGtidSet`]).
pub(in crate::engine) fn promote_action(
    context: &Context<'_>,
    site: &str,
    drain: PromoteDrain,
) -> Action {
    Action::Promote {
        site: site.to_string(),
        request: PromoteRequest {
            group: context.group().to_string(),
            drain,
            timeout_ms: u64::try_from(DRAIN_TIMEOUT.as_millis()).unwrap_or(u64::MAX),
        },
    }
}

/// Issues the new authority to `to`: generation + 1, cooldown started (both copies), every
/// deploy lease revoked (`TopologyChanged`), `lastFailover` recorded, the new authority pushed
/// and every other serving site repointed (the demoted old site stays fenced).
pub(in crate::engine) fn issue_promotion(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
    to: &str,
    kind: FailoverKind,
    from: &str,
) {
    take_authority(context, memory, plan, to);
    record_last_failover(context, memory, plan, to, kind, from);
    plan.cross_site(Action::RevokeDeployLeases {
        reason: RevokeReason::TopologyChanged,
        topology_generation: memory.topology_generation,
    });
    plan.event(
        EventReason::Promoted,
        format!(
            "{} failover: authority issued to {to} at topology generation {} (from {from})",
            kind_name(kind),
            memory.topology_generation
        ),
    );
}

/// Memory names `to` active at the next generation, issued now, and the cooldown starts
/// (status and annotation copies); `to` becomes `Active`.
fn take_authority(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan, to: &str) {
    let now = context.now;
    memory.advance_generation();
    memory.active_site = to.to_string();
    memory.authority_issued_at = Some(now);
    let cooldown = now + context.spec.failover_cooldown.get();
    memory.cooldown_until = Some(cooldown);
    plan.tail(Action::Annotate(AnnotationChange::SetCooldownUntil(
        cooldown,
    )));
    plan.transition_site(context, memory, to, SiteState::Active);
}

/// `lastFailover` of the promotion of `to` (status, and the annotation's `FailoverNote` with the
/// generation `take_authority` issued): its times from the
/// failover in flight, and the lower bound of what it lost (exact for a planned failover,
/// which drained every transaction of the old site).
fn record_last_failover(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
    to: &str,
    kind: FailoverKind,
    from: &str,
) {
    let now = context.now;
    let lost = context
        .view(to)
        .gtid
        .as_ref()
        .and_then(|new| lost_lower_bound(context, memory, from, to, new));
    let (started_at, detected_at, fenced_at, exact) = match kind {
        FailoverKind::Emergency => {
            let failover = memory.emergency_failover.as_ref();
            (
                failover.map(|f| f.started_at),
                failover.map(|f| f.detected_at),
                failover.and_then(|f| f.fenced_at),
                false,
            )
        }
        FailoverKind::Planned => {
            let planned = memory.planned_failover.as_ref();
            (
                planned.map(|p| p.phase_since),
                None,
                planned.and_then(|p| p.fenced_at),
                true,
            )
        }
    };
    memory.last_failover = Some(LastFailover {
        kind,
        from: from.to_string(),
        to: to.to_string(),
        started_at,
        detected_at,
        fenced_at,
        promoted_at: Some(now),
        completed_at: None,
        lost_transactions: lost.as_ref().map_or(0, GtidSet::count),
        lost_gtid_set: lost.as_ref().map(ToString::to_string),
        exact,
    });
    let note = FailoverNote {
        kind: kind.into(),
        from: from.to_string(),
        to: to.to_string(),
        promoted_at: now,
        topology_generation: memory.topology_generation,
        restore: None,
    };
    plan.tail(Action::Annotate(AnnotationChange::SetLastFailover(
        note.to_string(),
    )));
}

/// The lower bound of what a promotion of `to` loses: transactions known to have committed
/// on the old active site `from` that `new` (the promoted site's set) lacks.
///
/// Known to have committed there: the old site's last observed GTID set, plus whatever a
/// direct replica of it (memory: replicating straight from the old site's internal Service,
/// no errant transactions at its last check) holds now: it received those from the old site,
/// possibly after the operator last read the old site (not one still awaiting its re-seed
/// after a restore). Ignoring them would under-report the loss while the old site is
/// unreadable. Still a lower bound: the old site may have
/// committed more that nobody received. `None` when nothing is known of the old site.
fn lost_lower_bound(
    context: &Context<'_>,
    memory: &GroupMemory,
    from: &str,
    to: &str,
    new: &GtidSet,
) -> Option<GtidSet> {
    let old_host = source_host_of(context, from);
    let namespace = &context.observation.namespace;
    let received_from_old = memory
        .sites
        .iter()
        .filter(|site| site.site != from && site.site != to)
        .filter(|site| site.state == SiteState::Replica)
        .filter(|site| site.errant.as_ref().is_some_and(GtidSet::is_empty))
        // A replica awaiting its re-seed after a restore of the old site holds what the
        // restore discarded, not what the old site committed since (simulator seed 4162 with
        // `--all-faults --restore --image-update`: 1,245 reported lost, none lost).
        .filter(|site| !crate::engine::restore::withholds(memory, &site.site))
        .filter(|site| {
            site.source_host
                .as_deref()
                .is_some_and(|host| same_host(host, &old_host, namespace))
        })
        .filter_map(|site| {
            context
                .view(&site.site)
                .gtid
                .clone()
                .or_else(|| site.gtid_executed.clone())
        });
    let basis = memory
        .site(from)
        .and_then(|site| site.gtid_executed.clone())
        .into_iter()
        .chain(received_from_old)
        .reduce(|all, more| all.union(&more))?;
    Some(lost_transactions(&basis, new))
}

/// Completes a promotion once the new active site is confirmed writable: `completedAt`,
/// lost transactions re-measured against the drained new primary, metrics.
pub(in crate::engine) fn complete_promotion(
    context: &Context<'_>,
    memory: &mut GroupMemory,
    plan: &mut Plan,
) {
    let now = context.now;
    let active_gtid = context.view(&memory.active_site).gtid.clone();
    let Some(record) = memory.last_failover.as_mut() else {
        return;
    };
    if record.completed_at.is_some() {
        return;
    }
    record.completed_at = Some(now);
    if !record.exact {
        let old = memory
            .sites
            .iter()
            .find(|s| s.site == record.from)
            .and_then(|s| s.gtid_executed.clone());
        remeasure_lost(context, record, old, active_gtid);
    }
    report_completion(plan, record, now);
    memory.emergency_failover = None;
}

/// Re-measures a lower-bound loss against the drained, detached new primary (`active_gtid`);
/// what was already known lost at promotion stays in the basis with the old site's last
/// observed set (`old_gtid`): the direct replicas that proved it may have been repointed
/// since.
fn remeasure_lost(
    context: &Context<'_>,
    record: &mut LastFailover,
    old_gtid: Option<GtidSet>,
    active_gtid: Option<GtidSet>,
) {
    let flavor = mysql_flavor(context.spec.flavor);
    let known_lost = record
        .lost_gtid_set
        .as_deref()
        .and_then(|text| GtidSet::parse(flavor, text).ok());
    let basis = match (old_gtid, known_lost) {
        (Some(old), Some(known)) => Some(old.union(&known)),
        (old, known) => old.or(known),
    };
    if let (Some(basis), Some(new)) = (basis, active_gtid) {
        let lost = lost_transactions(&basis, &new);
        record.lost_transactions = lost.count();
        record.lost_gtid_set = Some(lost.to_string());
    }
}

/// The metrics and the Event of a completed failover.
fn report_completion(plan: &mut Plan, record: &LastFailover, now: Timestamp) {
    let kind = record.kind;
    let duration = record
        .started_at
        .map(|started| now.saturating_duration_since(started))
        .unwrap_or_default();
    let lost = record.lost_transactions;
    plan.tail(Action::Metric(MetricObservation::FailoverCompleted {
        kind,
    }));
    plan.tail(Action::Metric(MetricObservation::FailoverDuration {
        kind,
        duration,
    }));
    plan.tail(Action::Metric(MetricObservation::LostTransactions {
        count: lost,
    }));
    plan.event(
        EventReason::FailoverCompleted,
        format!(
            "{} failover {}->{} completed in {:?}; lost transactions {} ({})",
            kind_name(kind),
            record.from,
            record.to,
            duration,
            lost,
            if record.exact { "exact" } else { "lower bound" }
        ),
    );
}
