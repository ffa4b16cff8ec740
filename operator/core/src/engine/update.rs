//! Ordered update (docs/design/operator.md#ordered-update-and-restore-in-place;
//! docs/design/requirements.md R003.17-R003.18): a change of `spec.image` moves every site to
//! the new image, one site at a time, without a lost write.
//!
//! # Order
//!
//! 1. **Replicas first**, in spec order: each non-active site is recreated with the new image
//!    ([`Action::RollSite`]: the StatefulSet template's image is set, then the pod deleted with
//!    a grace period so mysqld shuts down cleanly) and the update waits until it is healthy
//!    again before it touches the next one: reachable, replicating directly from the active
//!    site and converged, and for a read-only site all five conjuncts of
//!    docs/design/requirements.md R000.7.
//! 2. **A planned failover** away from the active site to a read-write replica that already
//!    runs the new image, through the planned-failover path itself (`engine::planned`:
//!    Draining fences the old primary, the target is promoted only once it holds every one of
//!    its transactions: zero lost writes; the promotion bumps `topologyGeneration` and revokes
//!    the deploy leases).
//! 3. **The old active site**, now a replica again, is recreated like the others.
//!
//! Each step is derived from what this poll observed (the image each site pod runs), so an
//! operator restarted mid-way resumes from `status.orderedUpdate` and the pods: a site whose
//! pod already runs the new image is not recreated again.
//!
//! # Rules
//!
//! - **A site is recreated only while the whole group is healthy**: a valid authority, every
//!   site reachable, every replica healthy (with three sites the active one keeps its lease
//!   majority while one replica is down), no emergency failover and no other planned failover
//!   in flight. Until then the update waits and says what for; that wait has no bound, like
//!   the lease wait it ends on evidence.
//! - **A live failover-hold defers every step that disrupts** (a recreation, the failover):
//!   phase `Deferred`, `admission.deferReason: DeploymentHold`, `retryTime` the earliest hold
//!   expiry; a recreation already under way finishes. The decision that starts a recreation
//!   passes the shell's hold gate like a planned failover's drain (`engine::gate`).
//! - **Cooldown**: an update that needs a failover (the active site runs another image)
//!   follows `onCooldown` when it starts inside the cooldown: `reject` fails it, `defer` parks
//!   it until `cooldownUntil`; its planned failover follows `onCooldown` again (a cooldown an
//!   emergency failover started meanwhile).
//! - **Emergency failover takes precedence**: while one is in flight the update does nothing
//!   and its step clock stands still; afterwards it resumes from what it observes (the new
//!   active site, the demoted old one once it rejoined).
//! - **A failed step stops the update** (`Failed`, a Warning Event saying why): a recreated
//!   site not healthy again within [`UPDATE_STEP_TIMEOUT`], or the update's planned failover
//!   rejected (cooldown with `reject`, its admission or drain bounds). A failed update stays
//!   failed for that image; a new `spec.image` starts a new update.
//! - The active site is never recreated (asserted in `engine::plan`).
//!
//! The spec has no MySQL configuration field, so only `spec.image` starts an update.

use bloodraven_api::{
    names, Admission, DeferReason, OnCooldown, OrderedUpdatePhase, OrderedUpdateSite,
    OrderedUpdateStatus, PlannedFailoverPhase, SiteRole,
};

use super::action::{Action, EventReason};
use super::failover::cooldown_until;
use super::memory::{Detection, GroupMemory, SiteState};
use super::observation::{PodFacts, PodReading};
use super::plan::{Context, Plan};
use super::surfaces::replica_healthy;
use crate::time::{Duration, Timestamp};

/// How long a recreated site may take to be healthy again before the update fails. Time
/// during an emergency failover does not count.
pub const UPDATE_STEP_TIMEOUT: Duration = Duration::from_secs(600);
/// The grace period of a recreated site's pod: mysqld's clean shutdown.
pub const UPDATE_POD_GRACE: Duration = Duration::from_secs(30);

/// `status.orderedUpdate` in memory.
#[derive(Clone, Debug, PartialEq)]
pub struct OrderedUpdate {
    /// The image every site is moved to.
    pub target_image: String,
    /// The phase.
    pub phase: OrderedUpdatePhase,
    /// The site being recreated or waited for.
    pub current_site: Option<String>,
    /// The active site the update's failover moves away from.
    pub failover_from: Option<String>,
    /// The site the update's failover promotes.
    pub failover_target: Option<String>,
    /// Deferral detail.
    pub admission: Admission,
    /// What it does or waits for; why it failed.
    pub message: Option<String>,
    /// When the update was first seen.
    pub started_at: Timestamp,
    /// When the current step began (persisted: a restarted operator keeps the bound, and
    /// recognises the planned failover it requested by its request time).
    pub step_since: Timestamp,
    /// Per-site image and progress, in spec order.
    pub sites: Vec<OrderedUpdateSite>,
}

impl OrderedUpdate {
    /// Whether the update is in a non-final phase.
    pub fn in_flight(&self) -> bool {
        match self.phase {
            OrderedUpdatePhase::Admitting
            | OrderedUpdatePhase::Deferred
            | OrderedUpdatePhase::RollingReplica
            | OrderedUpdatePhase::FailingOver
            | OrderedUpdatePhase::RollingOldActive => true,
            OrderedUpdatePhase::Completed | OrderedUpdatePhase::Failed => false,
        }
    }

    /// Whether a site is being recreated (a recreation's decision passes the hold gate).
    pub fn rolling(&self) -> Option<&str> {
        match self.phase {
            OrderedUpdatePhase::RollingReplica | OrderedUpdatePhase::RollingOldActive => {
                self.current_site.as_deref()
            }
            OrderedUpdatePhase::Admitting
            | OrderedUpdatePhase::Deferred
            | OrderedUpdatePhase::FailingOver
            | OrderedUpdatePhase::Completed
            | OrderedUpdatePhase::Failed => None,
        }
    }

    /// The status to write.
    pub fn to_status(&self) -> OrderedUpdateStatus {
        OrderedUpdateStatus {
            phase: self.phase,
            target_image: self.target_image.clone(),
            current_site: self.current_site.clone(),
            failover_from: self.failover_from.clone(),
            failover_target: self.failover_target.clone(),
            admission: self.admission.clone(),
            message: self.message.clone(),
            started_at: Some(self.started_at),
            step_since: Some(self.step_since),
            sites: self.sites.clone(),
        }
    }

    /// The memory a restarted operator resumes from (`now` for a time the status lacks).
    pub fn from_status(status: &OrderedUpdateStatus, now: Timestamp) -> OrderedUpdate {
        OrderedUpdate {
            target_image: status.target_image.clone(),
            phase: status.phase,
            current_site: status.current_site.clone(),
            failover_from: status.failover_from.clone(),
            failover_target: status.failover_target.clone(),
            admission: status.admission.clone(),
            message: status.message.clone(),
            started_at: status.started_at.unwrap_or(now),
            step_since: status.step_since.unwrap_or(now),
            sites: status.sites.clone(),
        }
    }
}

/// The planned failover the update requests this poll (its target), read by
/// `engine::planned` as if it were the annotation: only in `FailingOver`.
pub(super) fn failover_request(memory: &GroupMemory) -> Option<String> {
    let update = memory.ordered_update.as_ref()?;
    match update.phase {
        OrderedUpdatePhase::FailingOver => {}
        OrderedUpdatePhase::Admitting
        | OrderedUpdatePhase::Deferred
        | OrderedUpdatePhase::RollingReplica
        | OrderedUpdatePhase::RollingOldActive
        | OrderedUpdatePhase::Completed
        | OrderedUpdatePhase::Failed => return None,
    }
    let target = update.failover_target.clone()?;
    // A finished planned failover to the same target whose request was never seen withdrawn
    // would take this request for itself: wait until it was (one poll without the request).
    let stale = memory.planned_failover.as_ref().is_some_and(|planned| {
        !planned.annotation_cleared
            && planned.target == target
            && planned.requested_at < update.step_since
            && matches!(
                planned.phase,
                PlannedFailoverPhase::Completed | PlannedFailoverPhase::Rejected
            )
    });
    (!stale).then_some(target)
}

/// The pod facts of `site`, when the pod was read and exists.
fn pod<'a>(context: &'a Context<'_>, site: &str) -> Option<&'a PodFacts> {
    context
        .observation
        .sites
        .iter()
        .find(|observed| observed.site == site)
        .and_then(|observed| match &observed.pod {
            PodReading::Present(facts) => Some(facts),
            PodReading::Unknown | PodReading::Absent => None,
        })
}

/// The image the site's pod runs, when known and the pod is not being deleted.
fn running_image<'a>(context: &'a Context<'_>, site: &str) -> Option<&'a str> {
    pod(context, site)
        .filter(|facts| !facts.terminating)
        .and_then(|facts| facts.mysql_image.as_deref())
}

/// Whether `site` serves healthily this poll: the active site writable under the authority,
/// a replica reachable and healthy (a read-only one by all five conjuncts).
fn healthy_now(context: &Context<'_>, memory: &GroupMemory, site: &str) -> bool {
    let Some(entry) = memory.site(site) else {
        return false;
    };
    let view = context.view(site);
    if entry.detection != Detection::Up || !view.is_up() {
        return false;
    }
    if site == memory.active_site {
        return entry.state == SiteState::Active
            && view.is_writable()
            && memory.authority.is_valid();
    }
    if entry.state != SiteState::Replica {
        return false;
    }
    context
        .role(site)
        .is_some_and(|role| replica_healthy(context, memory, site, role))
}

/// Sites of the spec, in order, whose pod runs another image than `target` (a pod not read,
/// absent or terminating counts as not yet on `target`).
fn sites_off_target(context: &Context<'_>, target: &str) -> Vec<String> {
    context
        .site_names()
        .filter(|site| running_image(context, site) != Some(target))
        .map(str::to_string)
        .collect()
}

/// Advances the ordered update by one poll (after the emergency step, before the planned
/// one, which reads [`failover_request`]).
pub(super) fn update_step(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    let now = context.now;
    let target = context.spec.image.clone();
    let superseded = memory
        .ordered_update
        .as_ref()
        .is_some_and(|update| update.target_image != target);
    if memory.ordered_update.is_none() || superseded {
        if !start_wanted(context, memory, &target) {
            return;
        }
        let previous = memory.ordered_update.take();
        let message = match &previous {
            Some(previous) if previous.in_flight() => format!(
                "ordered update to {target} supersedes the one to {} ({:?})",
                previous.target_image, previous.phase
            ),
            Some(_) | None => format!("ordered update to {target} started"),
        };
        memory.ordered_update = Some(OrderedUpdate {
            target_image: target.clone(),
            phase: OrderedUpdatePhase::Admitting,
            current_site: None,
            failover_from: None,
            failover_target: None,
            admission: Admission::default(),
            message: Some(message.clone()),
            started_at: now,
            step_since: now,
            sites: Vec::new(),
        });
        plan.event(EventReason::OrderedUpdateStarted, message);
    }
    let sites = site_images(context, memory, &target);
    let Some(update) = memory.ordered_update.as_mut() else {
        return;
    };
    update.sites = sites;
    if !update.in_flight() {
        return;
    }
    // Emergency failover takes precedence; its time does not count against the step.
    if memory.emergency_failover.is_some() {
        update.step_since = update.step_since.max(now);
        if update.phase == OrderedUpdatePhase::FailingOver {
            // The emergency ends the update's planned failover (aborted or moot): the next
            // step is chosen again afterwards, from the topology it leaves.
            update.phase = OrderedUpdatePhase::Admitting;
            update.failover_target = None;
        }
        update.message =
            Some("waiting: an emergency failover takes precedence; resumed afterwards".into());
        return;
    }
    match update.phase {
        OrderedUpdatePhase::Admitting | OrderedUpdatePhase::Deferred => {
            admit(context, memory, plan, &target)
        }
        OrderedUpdatePhase::RollingReplica | OrderedUpdatePhase::RollingOldActive => {
            roll_in_flight(context, memory, plan, &target)
        }
        OrderedUpdatePhase::FailingOver => failing_over(context, memory, plan, &target),
        OrderedUpdatePhase::Completed | OrderedUpdatePhase::Failed => {}
    }
}

/// A new update starts once the group has an authority and some site's pod is read running
/// another image than `spec.image`.
fn start_wanted(context: &Context<'_>, memory: &GroupMemory, target: &str) -> bool {
    memory.topology_generation > 0
        && context.site_names().any(|site| {
            pod(context, site)
                .and_then(|facts| facts.mysql_image.as_deref())
                .is_some_and(|image| image != target)
        })
}

fn site_images(
    context: &Context<'_>,
    memory: &GroupMemory,
    target: &str,
) -> Vec<OrderedUpdateSite> {
    context
        .site_names()
        .map(|site| {
            let image = pod(context, site).and_then(|facts| facts.mysql_image.clone());
            let updated = image.as_deref() == Some(target) && healthy_now(context, memory, site);
            OrderedUpdateSite {
                name: site.to_string(),
                image,
                updated,
            }
        })
        .collect()
}

/// Fails the update for good with `message`.
fn fail(update: &mut OrderedUpdate, plan: &mut Plan, message: String) {
    update.phase = OrderedUpdatePhase::Failed;
    update.admission = Admission::default();
    update.message = Some(message.clone());
    plan.event(EventReason::OrderedUpdateFailed, message);
}

/// Parks the update with `admission` (an event and the phase change on entering only).
fn defer(update: &mut OrderedUpdate, plan: &mut Plan, admission: Admission, now: Timestamp) {
    let entering = update.phase != OrderedUpdatePhase::Deferred;
    let message = admission.message.clone().unwrap_or_default();
    update.phase = OrderedUpdatePhase::Deferred;
    update.message = admission.message.clone();
    update.admission = admission;
    update.step_since = now;
    if entering {
        plan.event(EventReason::OrderedUpdateDeferred, message);
    }
}

/// The hold's admission, when a live failover-hold defers the next step.
fn hold_admission(context: &Context<'_>) -> Option<Admission> {
    let hold = context.observation.deploy_hold.as_ref()?;
    Some(super::gate::hold_deferral("ordered update", hold))
}

fn admit(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan, target: &str) {
    let now = context.now;
    let active_off = running_image(context, &memory.active_site) != Some(target);
    let cooldown = cooldown_until(context, memory).filter(|until| now < *until);
    let Some(update) = memory.ordered_update.as_mut() else {
        return;
    };
    if let (Some(until), true) = (cooldown, active_off) {
        match context.spec.planned_failover.on_cooldown {
            OnCooldown::Reject => {
                return fail(
                    update,
                    plan,
                    format!("ordered update to {target} rejected: inside the failover cooldown until {until} (onCooldown: reject)"),
                );
            }
            OnCooldown::Defer => {
                return defer(
                    update,
                    plan,
                    Admission {
                        defer_reason: Some(DeferReason::Cooldown),
                        retry_time: Some(until),
                        message: Some(format!(
                            "ordered update to {target} inside the failover cooldown; retried at {until} (onCooldown: defer)"
                        )),
                    },
                    now,
                );
            }
        }
    }
    next_step(context, memory, plan, target);
}

/// Chooses and starts the next step from what this poll observed.
fn next_step(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan, target: &str) {
    let now = context.now;
    let active = memory.active_site.clone();
    let off = sites_off_target(context, target);
    let unhealthy: Vec<&str> = context
        .site_names()
        .filter(|site| !healthy_now(context, memory, site))
        .collect();
    let all_healthy = unhealthy.is_empty();
    let planned_in_flight = super::stability::planned_in_flight(memory).is_some();
    // A planned failover annotation not yet taken (the planned step runs after this one and
    // may start draining in this very decision), unless it is the request already handled.
    let planned_requested = context
        .observation
        .annotations
        .planned_failover
        .as_ref()
        .is_some_and(|target| {
            !memory.planned_failover.as_ref().is_some_and(|planned| {
                planned.target == *target
                    && !planned.annotation_cleared
                    && matches!(
                        planned.phase,
                        PlannedFailoverPhase::Completed | PlannedFailoverPhase::Rejected
                    )
            })
        });
    let restore_pending = super::restore::pending(memory);
    let rejoining = super::rejoin::in_flight_site(memory).map(str::to_owned);
    let other_planned =
        planned_in_flight || planned_requested || restore_pending || rejoining.is_some();
    let hold = hold_admission(context);
    let failover_from = memory
        .ordered_update
        .as_ref()
        .and_then(|update| update.failover_from.clone());
    let Some(update) = memory.ordered_update.as_mut() else {
        return;
    };
    if off.is_empty() {
        if !all_healthy {
            update.message = Some(format!(
                "every site runs {target}; waiting for every site to be healthy"
            ));
            return;
        }
        update.phase = OrderedUpdatePhase::Completed;
        update.current_site = None;
        update.admission = Admission::default();
        let message =
            format!("ordered update to {target} completed: every site runs it and is healthy");
        update.message = Some(message.clone());
        plan.event(EventReason::OrderedUpdateCompleted, message);
        return;
    }
    if !all_healthy || other_planned {
        let waiting = if restore_pending {
            "the restore in place to finish".to_string()
        } else if let Some(site) = &rejoining {
            format!("the rejoin of {site} to finish")
        } else if other_planned {
            "another planned failover to finish".to_string()
        } else {
            format!(
                "every site to be healthy (not yet: {})",
                unhealthy.join(", ")
            )
        };
        if update.phase == OrderedUpdatePhase::Deferred {
            update.phase = OrderedUpdatePhase::Admitting;
            update.admission = Admission::default();
        }
        update.message = Some(format!("ordered update to {target} waiting for {waiting}"));
        return;
    }
    if let Some(admission) = hold {
        return defer(update, plan, admission, now);
    }
    let replica_off = off.iter().find(|site| **site != active);
    if let Some(site) = replica_off {
        let Some(facts) = pod(context, site) else {
            return;
        };
        let phase = if failover_from.as_deref() == Some(site.as_str()) {
            OrderedUpdatePhase::RollingOldActive
        } else {
            OrderedUpdatePhase::RollingReplica
        };
        update.phase = phase;
        update.current_site = Some(site.clone());
        update.admission = Admission::default();
        update.step_since = now;
        let message = format!(
            "ordered update to {target}: recreating {site} (runs {})",
            facts.mysql_image.as_deref().unwrap_or("an unknown image")
        );
        update.message = Some(message.clone());
        plan.cross_site(roll_action(context, site, facts, target));
        plan.event(EventReason::OrderedUpdateRollingSite, message);
        return;
    }
    // Only the active site is left: fail over to a read-write replica on the new image.
    let candidate = context
        .spec
        .sites
        .iter()
        .filter(|site| site.role == SiteRole::ReadWrite && site.name != active)
        .map(|site| site.name.clone())
        .find(|site| running_image(context, site) == Some(target));
    let Some(candidate) = candidate else {
        return fail(
            update,
            plan,
            format!("ordered update to {target}: no read-write replica runs {target} to fail over to from {active}"),
        );
    };
    update.phase = OrderedUpdatePhase::FailingOver;
    update.current_site = Some(active.clone());
    update.failover_from = Some(active.clone());
    update.failover_target = Some(candidate.clone());
    update.admission = Admission::default();
    update.step_since = now;
    let message = format!(
        "ordered update to {target}: every replica runs it; planned failover {active} -> {candidate}"
    );
    update.message = Some(message.clone());
    plan.event(EventReason::OrderedUpdateFailingOver, message);
}

fn roll_action(context: &Context<'_>, site: &str, facts: &PodFacts, target: &str) -> Action {
    Action::RollSite {
        site: site.to_string(),
        pod: names::pod(context.group(), site),
        uid: facts.uid.clone(),
        image: target.to_string(),
        grace: UPDATE_POD_GRACE,
    }
}

/// A recreation under way: re-issued while the site's pod still runs the old image (a lost
/// or failed deletion), done once it runs the new one and is healthy again.
fn roll_in_flight(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan, target: &str) {
    let now = context.now;
    let Some(site) = memory
        .ordered_update
        .as_ref()
        .and_then(|update| update.current_site.clone())
    else {
        return next_step(context, memory, plan, target);
    };
    if site == memory.active_site {
        // An emergency failover made the site being recreated active: choose again.
        return next_step(context, memory, plan, target);
    }
    let healthy = healthy_now(context, memory, &site);
    let facts = pod(context, &site);
    let on_target = running_image(context, &site) == Some(target);
    let Some(update) = memory.ordered_update.as_mut() else {
        return;
    };
    if on_target && healthy {
        let message = format!("ordered update to {target}: {site} runs it and is healthy again");
        update.message = Some(message.clone());
        update.phase = OrderedUpdatePhase::Admitting;
        update.current_site = None;
        plan.event(EventReason::OrderedUpdateSiteUpdated, message);
        return next_step(context, memory, plan, target);
    }
    if now.saturating_duration_since(update.step_since) > UPDATE_STEP_TIMEOUT {
        return fail(
            update,
            plan,
            format!("ordered update to {target} stopped: {site} was not healthy again within {UPDATE_STEP_TIMEOUT:?} of its recreation"),
        );
    }
    match facts {
        Some(facts) if !facts.terminating && facts.mysql_image.as_deref() != Some(target) => {
            plan.cross_site(roll_action(context, &site, facts, target));
            update.message = Some(format!(
                "ordered update to {target}: recreating {site} again (its pod still runs {})",
                facts.mysql_image.as_deref().unwrap_or("an unknown image")
            ));
        }
        Some(_) | None => {
            update.message = Some(format!(
                "ordered update to {target}: waiting for {site} to run it and be healthy again"
            ));
        }
    }
}

/// The update's planned failover: done once the authority moved away from the old active
/// site and is valid again; failed when the planned failover it requested was rejected.
fn failing_over(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan, target: &str) {
    let active = memory.active_site.clone();
    let valid = memory.authority.is_valid();
    let planned = memory.planned_failover.clone();
    let Some(update) = memory.ordered_update.as_mut() else {
        return;
    };
    let from = update.failover_from.clone().unwrap_or_default();
    if active != from {
        if valid {
            let message =
                format!("ordered update to {target}: the authority moved from {from} to {active}");
            update.message = Some(message);
            update.phase = OrderedUpdatePhase::Admitting;
            update.current_site = None;
            return next_step(context, memory, plan, target);
        }
        update.message = Some(format!(
            "ordered update to {target}: waiting for {active} to be confirmed writable"
        ));
        return;
    }
    let ours = planned.as_ref().filter(|planned| {
        Some(&planned.target) == update.failover_target.as_ref()
            && planned.requested_at >= update.step_since
    });
    if let Some(planned) = ours {
        match planned.phase {
            PlannedFailoverPhase::Rejected => {
                let why = planned.admission.message.clone().unwrap_or_default();
                fail(
                    update,
                    plan,
                    format!("ordered update to {target} stopped: its planned failover {from} -> {} was rejected: {why}", planned.target),
                );
            }
            PlannedFailoverPhase::Deferred => {
                update.admission = planned.admission.clone();
                update.message = planned.admission.message.clone();
            }
            PlannedFailoverPhase::Admitting
            | PlannedFailoverPhase::Draining
            | PlannedFailoverPhase::Promoting
            | PlannedFailoverPhase::Completed => {
                update.admission = Admission::default();
                update.message = Some(format!(
                    "ordered update to {target}: planned failover {from} -> {} {:?}",
                    planned.target, planned.phase
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests;
