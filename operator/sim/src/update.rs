//! The ordered update in the simulated world (docs/design/history.md#issue-12-part-1,
//! `--image-update`): a human changes `spec.image` once, at a random time before the quiet
//! tail; the operator's `RollSite` sets the site StatefulSet's template image and deletes its
//! pod (mysqld stops cleanly within the grace period, the new pod starts 1-3 s later with the
//! template's image). The other fault modes keep running meanwhile.
//!
//! Invariants (besides every other class, which keeps judging split brain and loss):
//! - `UpdateNotOneAtATime`: a site is recreated while the one recreated before it does not
//!   yet run the new image labelled healthy by the same decision, or the active site is
//!   recreated.
//! - `UpdateIgnoredHold`: a decision starts a recreation or a planned failover while the
//!   poll's observation holds a live failover-hold (`engine::gated_start`).
//! - `UpdateIncomplete`: at the end of the run, with the group healthy (every pod labelled
//!   healthy under a valid authority), some pod still runs another image than `spec.image`,
//!   unless the update was refused inside the cooldown (`onCooldown: reject`) or stopped by
//!   its planned failover's rejection or abort (a failed step; both are counted).

use bloodraven_api::OrderedUpdatePhase;
use bloodraven_core::engine::{gated_start, Action, Decision, GroupMemory, Observation, PodRole};
use bloodraven_core::time::Duration;
use rand::Rng;

use crate::clock::SimTime;
use crate::faults::QUIET_TAIL_MILLIS;
use crate::invariants::FindingClass;
use crate::trace;
use crate::world::{Event, World, SITE_NAMES};

/// The image the playground starts with.
pub const IMAGE_BEFORE: &str = "mariadb:10.11";
/// The image the human changes `spec.image` to.
pub const IMAGE_AFTER: &str = "mariadb:10.11-sim-update";
/// Earliest the image changes.
const CHANGE_MILLIS_MIN: u64 = 20_000;
/// The change happens at least this long before the quiet tail, so the update can finish.
const CHANGE_BEFORE_TAIL_MILLIS: u64 = 120_000;
/// Earliest a deleted pod's mysqld has shut down cleanly.
const SHUTDOWN_MILLIS_MIN: u64 = 300;
/// Latest it has (well within the grace period).
const SHUTDOWN_MILLIS_MAX: u64 = 3_000;

/// What the run tracks of the update.
#[derive(Debug, Default)]
pub struct UpdateTrack {
    /// When `spec.image` changed (`None`: not yet, or not on).
    pub changed_at: Option<SimTime>,
    /// The site recreated last.
    pub rolling: Option<usize>,
}

impl World {
    /// Draws when the image changes (only with `--image-update`, so other modes keep their
    /// random streams).
    pub fn schedule_image_change(&mut self) {
        if !self.cfg.image_update {
            return;
        }
        let latest = self
            .cfg
            .duration
            .as_millis()
            .saturating_sub(QUIET_TAIL_MILLIS + CHANGE_BEFORE_TAIL_MILLIS)
            .max(CHANGE_MILLIS_MIN + 1);
        let at = self.rng.random_range(CHANGE_MILLIS_MIN..latest);
        self.schedule_at(SimTime(at), Event::ImageChange);
    }

    /// The human edits `spec.image`.
    pub fn image_change(&mut self) {
        trace!(
            self.trace,
            self.now,
            "human",
            "changes spec.image {} -> {}",
            self.operator.spec.image,
            IMAGE_AFTER
        );
        self.operator.spec.image = IMAGE_AFTER.to_string();
        self.update.changed_at = Some(self.now);
        self.stats.image_changes += 1;
    }

    /// The operator's `RollSite`: the template's image, then the pod deletion (conditional
    /// on its uid), after which mysqld shuts down well within the grace period.
    pub fn roll_site(&mut self, site: usize, uid: &str, image: &str, grace: Duration) -> bool {
        self.pods[site].template_image = image.to_string();
        let grace = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
        let what = format!(
            "recreates {} with {image} (deletes pod {uid})",
            SITE_NAMES[site]
        );
        let started = self.terminate_pod(site, uid, &what, |world| {
            world
                .rng
                .random_range(SHUTDOWN_MILLIS_MIN..=SHUTDOWN_MILLIS_MAX)
                .min(grace.max(1))
        });
        match started {
            None => false,
            Some(started) => {
                if started {
                    self.stats.site_recreations += 1;
                }
                self.update.rolling = Some(site);
                true
            }
        }
    }

    /// Before `decision` executes: each site it recreates is not the active one, and the
    /// site recreated before it runs the new image and is labelled healthy by this decision.
    fn check_one_at_a_time(&mut self, decision: &Decision) {
        for action in &decision.actions {
            let Action::RollSite { site, .. } = action else {
                continue;
            };
            let Some(index) = SITE_NAMES.iter().position(|name| name == site) else {
                continue;
            };
            self.check_roll(decision, index);
        }
    }

    fn check_roll(&mut self, decision: &Decision, site: usize) {
        if self.newest_active_site() == Some(site)
            || decision.memory.active_site == SITE_NAMES[site]
        {
            let detail = format!("{} recreated while active", SITE_NAMES[site]);
            self.checker
                .report(FindingClass::UpdateNotOneAtATime, self.now, detail);
        }
        let Some(previous) = self.update.rolling.filter(|&previous| previous != site) else {
            return;
        };
        let labelled_healthy = decision.actions.iter().any(|action| {
            matches!(action, Action::SetPodLabels { site, role: PodRole::Replica | PodRole::Primary, healthy: true, .. }
                if site == SITE_NAMES[previous])
        });
        let back = self.pods[previous].image == self.operator.spec.image
            && !self.pods[previous].terminating
            && labelled_healthy;
        if !back {
            let detail = format!(
                "{} recreated while {} (recreated before it) is not back healthy on {}",
                SITE_NAMES[site], SITE_NAMES[previous], self.operator.spec.image
            );
            self.checker
                .report(FindingClass::UpdateNotOneAtATime, self.now, detail);
        }
    }

    /// docs/design/requirements.md R003.17: no decision starts a recreation or a planned
    /// failover while the observation it was decided from holds a live failover-hold.
    pub fn check_update_hold(
        &mut self,
        memory: &GroupMemory,
        observation: &Observation,
        decision: &Decision,
    ) {
        self.check_one_at_a_time(decision);
        let update = decision.memory.ordered_update.as_ref();
        if update.is_some_and(|update| {
            update.phase == OrderedUpdatePhase::Deferred
                && update.admission.defer_reason
                    == Some(bloodraven_api::DeferReason::DeploymentHold)
        }) {
            self.stats.update_polls_deferred_by_hold += 1;
        }
        let Some(hold) = &observation.deploy_hold else {
            return;
        };
        if let Some(start) = gated_start(memory, &decision.memory) {
            let detail = format!(
                "{:?} {} -> {} started under the failover-hold of {}",
                start.kind, start.from, start.target, hold.operation_id
            );
            self.checker
                .report(FindingClass::UpdateIgnoredHold, self.now, detail);
        }
    }

    /// At the end of the run: a healthy group runs `spec.image` everywhere.
    pub fn check_update_complete(&mut self) {
        if self.update.changed_at.is_none() {
            return;
        }
        let target = self.operator.spec.image.clone();
        let memory = self.operator.memory.clone();
        let update = memory.as_ref().and_then(|m| m.ordered_update.clone());
        let everywhere = self.pods.iter().all(|pod| pod.image == target);
        if everywhere {
            if update
                .as_ref()
                .is_some_and(|u| u.phase == OrderedUpdatePhase::Completed)
            {
                self.stats.updates_completed += 1;
            }
            return;
        }
        let failed_because = |needle: &str| {
            update.as_ref().is_some_and(|u| {
                u.phase == OrderedUpdatePhase::Failed
                    && u.message.as_deref().is_some_and(|m| m.contains(needle))
            })
        };
        if failed_because("onCooldown: reject") {
            self.stats.updates_rejected_in_cooldown += 1;
            return;
        }
        // Its planned failover was rejected or aborted (a fault hit the target while it
        // drained, its admission bound): a failed step, which stops the update by design.
        if failed_because("was rejected") {
            self.stats.updates_failed_failover += 1;
            return;
        }
        let valid = memory.as_ref().is_some_and(|m| m.authority.is_valid());
        let healthy = valid
            && self.operator.up
            && (0..SITE_NAMES.len()).all(|site| {
                self.store
                    .labels
                    .get(&site)
                    .is_some_and(|(role, healthy)| *healthy && *role != PodRole::Fenced)
            });
        if !healthy {
            self.stats.updates_blocked_unhealthy += 1;
            return;
        }
        let images: Vec<String> = self
            .pods
            .iter()
            .enumerate()
            .map(|(site, pod)| format!("{}={}", SITE_NAMES[site], pod.image))
            .collect();
        let detail = format!(
            "healthy group, spec.image {target}, pods {}; update {:?}: {:?}",
            images.join(" "),
            update.as_ref().map(|u| u.phase),
            update.as_ref().and_then(|u| u.message.clone())
        );
        self.checker
            .report(FindingClass::UpdateIncomplete, self.now, detail);
    }
}
