//! The entry points: [`decide`] and [`decide_with_options`].

use bloodraven_api::MysqlFailoverGroupSpec;

use super::action::{Action, AnnotationChange, Decision, EventReason};
use super::conditions::{conditions, set_condition, spec_valid};
use super::detection::{adopt_newer_authority, adopt_noted_failover, observe_sites};
use super::failover::{
    complete_promotion, converge, emergency_step, keep_cooldown_copies, returning_primaries,
};
use super::memory::{AuthorityValidity, EmergencyPhase, GroupMemory, SiteMemory, SiteState};
use super::observation::Observation;
use super::options::DecideOptions;
use super::plan::{Context, Plan};
use super::planned;
use super::reading::{mysql_flavor, read_sites};
use super::rejoin;
use super::restore;
use super::surfaces;
use super::unvouched;
use super::update;
use crate::deploy::RevokeReason;
use crate::time::Timestamp;

/// Decides one poll of one group with the default options. Pure and deterministic: the same
/// inputs always give the same decision; no clock, I/O or randomness.
pub fn decide(
    spec: &MysqlFailoverGroupSpec,
    memory: &GroupMemory,
    observation: &Observation,
    now: Timestamp,
) -> Decision {
    decide_with_options(spec, memory, observation, now, DecideOptions::default())
}

/// [`decide`] with explicit [`DecideOptions`].
///
/// One poll, in the order docs/design/architecture.md#one-poll requires: per-site state and
/// transitions first (their taints lead the action list), then cross-site decisions (emergency
/// failover, planned failover, returning-primary fencing, primary reassertion, repointing),
/// then pod labels, Services, the DNSEndpoint, annotations, events and metrics. The rejoin of
/// a fenced returning primary (`engine::rejoin`) precedes returning-primary fencing, which
/// leaves a site a rejoin holds alone.
pub fn decide_with_options(
    spec: &MysqlFailoverGroupSpec,
    memory: &GroupMemory,
    observation: &Observation,
    now: Timestamp,
    options: DecideOptions,
) -> Decision {
    let problems = spec.validate();
    if !problems.is_empty() {
        return spec_invalid(spec, memory, &problems, now);
    }
    let site_names: Vec<String> = spec.sites.iter().map(|site| site.name.clone()).collect();
    let context = Context {
        spec,
        observation,
        now,
        options,
        views: read_sites(observation, &site_names, mysql_flavor(spec.flavor)),
    };
    let previous_authority = memory.authority.clone();
    let mut memory = aligned_with_spec(spec, memory);
    let mut plan = Plan::default();
    if let Some(highest) = context
        .views
        .values()
        .filter_map(|view| view.authority.as_ref())
        .map(|authority| authority.topology_generation)
        .max()
    {
        plan.floor_generations(highest);
    }

    // 1. Per-site state: detection, status mirror, restarts; a newer authority adopted, the
    // operator's own note of its last failover first, then what the sidecars cache.
    observe_sites(&context, &mut memory, &mut plan);
    adopt_noted_failover(&context, &mut memory, &mut plan);
    adopt_newer_authority(&context, &mut memory, &mut plan);
    keep_demoted_taints(&context, &memory, &mut plan);

    // 2. Cross-site decisions. An authority no sidecar vouches for (bootstrap included) is
    // issued only after the GTID sets were compared.
    let withheld = unvouched::settle(&context, &mut memory, &mut plan);
    revoke_on_annotation(&context, &memory, &mut plan);
    emergency_step(&context, &mut memory, &mut plan);
    update::update_step(&context, &mut memory, &mut plan);
    planned::planned_step(&context, &mut memory, &mut plan);
    restore::backup_step(&context, &mut memory, &mut plan);
    restore::restore_step(&context, &mut memory, &mut plan);
    if !withheld {
        restore::release_forgotten_fence(&context, &mut memory, &mut plan);
    }
    memory.authority = surfaces::authority_validity(&context, &memory, &previous_authority);
    memory.authority_invalid_since = match (&memory.authority, &previous_authority) {
        (AuthorityValidity::Valid, _) => None,
        (AuthorityValidity::Invalid(_), AuthorityValidity::Valid) => Some(context.now),
        (AuthorityValidity::Invalid(_), AuthorityValidity::Invalid(_)) => {
            memory.authority_invalid_since.or(Some(context.now))
        }
    };
    if memory.authority.is_valid() {
        let promoting =
            memory
                .emergency_failover
                .as_ref()
                .is_some_and(|failover| match failover.phase {
                    EmergencyPhase::Promoting { .. } => true,
                    EmergencyPhase::AwaitingLeaseExpiry
                    | EmergencyPhase::CatchingUp { .. }
                    | EmergencyPhase::Draining { .. } => false,
                });
        if promoting
            || memory
                .last_failover
                .as_ref()
                .is_some_and(|f| f.completed_at.is_none())
        {
            complete_promotion(&context, &mut memory, &mut plan);
        }
        planned::complete(&mut memory, &mut plan);
    }
    keep_cooldown_copies(&context, &mut memory, &mut plan);
    let authority_valid = memory.authority.is_valid();
    rejoin::rejoin_step(&context, &mut memory, &mut plan);
    returning_primaries(&context, &mut memory, &mut plan, authority_valid);
    if !withheld {
        converge(&context, &mut memory, &mut plan);
    }
    surfaces::report_validity(&memory, &previous_authority, &mut plan);

    // 3. Surfaces.
    surfaces::labels(&context, &mut memory, &mut plan);
    surfaces::services(&context, &mut plan);
    surfaces::dns(&context, &memory, &mut plan);
    let previous_conditions = std::mem::take(&mut memory.conditions);
    memory.conditions = conditions(&memory, &previous_conditions, now);
    set_condition(
        &mut memory.conditions,
        spec_valid(&[], &previous_conditions, now),
    );

    plan.finish(spec, memory)
}

/// An unusable spec decides nothing (docs/design/operator.md#mysqlfailovergroup, "An invalid
/// spec builds nothing and says so"): no authority, no surfaces, no failover, whatever the
/// sites do. Memory stays as the last valid spec left it, but for the `SpecValid=False`
/// condition naming every problem; what runs keeps running, and the shell builds nothing for
/// the group. The `SpecInvalid` Warning Event is raised when the condition says something new
/// (the spec turned invalid, or other problems), not at every poll: the condition is where the
/// problem stays visible.
fn spec_invalid(
    spec: &MysqlFailoverGroupSpec,
    memory: &GroupMemory,
    problems: &[String],
    now: Timestamp,
) -> Decision {
    let mut plan = Plan::default();
    let condition = spec_valid(problems, &memory.conditions, now);
    let already_said = memory.conditions.iter().any(|said| {
        said.type_ == condition.type_
            && said.status == condition.status
            && said.message == condition.message
    });
    if !already_said {
        plan.event(EventReason::SpecInvalid, condition.message.clone());
    }
    let mut memory = memory.clone();
    set_condition(&mut memory.conditions, condition);
    plan.finish(spec, memory)
}

/// Memory with exactly one entry per spec site, in spec order (sites added to the spec start
/// as replicas; removed ones are forgotten).
fn aligned_with_spec(spec: &MysqlFailoverGroupSpec, memory: &GroupMemory) -> GroupMemory {
    let mut aligned = memory.clone();
    aligned.sites = spec
        .sites
        .iter()
        .map(|site| {
            memory.site(&site.name).cloned().unwrap_or_else(|| {
                let state = if site.name == memory.active_site {
                    SiteState::Active
                } else {
                    SiteState::Replica
                };
                SiteMemory::new(&site.name, state)
            })
        })
        .collect();
    aligned
}

/// Re-asserts the taint of every read-write site that stays demoted (idempotent).
fn keep_demoted_taints(context: &Context<'_>, memory: &GroupMemory, plan: &mut Plan) {
    for site in &memory.sites {
        if site.state == SiteState::Demoted {
            if let Some(role) = context.role(&site.site) {
                plan.keep_taint(
                    &site.site,
                    role,
                    context.view(&site.site).node_name.as_deref(),
                );
            }
        }
    }
}

/// The revoke annotation revokes every deploy lease (`OperatorRevoked`) and is removed.
fn revoke_on_annotation(context: &Context<'_>, memory: &GroupMemory, plan: &mut Plan) {
    if !context.observation.annotations.revoke_deployment_leases {
        return;
    }
    plan.cross_site(Action::RevokeDeployLeases {
        reason: RevokeReason::OperatorRevoked,
        topology_generation: memory.topology_generation,
    });
    plan.tail(Action::Annotate(
        AnnotationChange::ClearRevokeDeploymentLeases,
    ));
}
