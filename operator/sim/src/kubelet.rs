//! The kubelet and the site pods' API objects, as core's agentless rule reads and uses them
//! (docs/design/history.md#issue-10): a pod's uid and creation, whether it is terminating, the
//! sidecar container's readiness, and the node's `Ready` condition; and the deletion the
//! operator asks for.
//!
//! - **Node readiness**: the control plane sits with the operator, so a site's kubelet
//!   reaches the API server exactly when the operator reaches the site
//!   (`net.connected(OPERATOR_NODE, site)`); a cut node reads not ready at once (a real node
//!   controller takes 40 s, during which a requested kill just waits: same safety, slower).
//! - **Sidecar readiness**: a crashed sidecar is not ready at once (its container exited); a
//!   hung one once its `/healthz` probe failed three times in a row (2 s period, 1 s
//!   timeout: 5 to 7 s after the hang, drawn per hang).
//! - **Deletion**: a deletion conditional on the current uid marks the pod terminating; the
//!   kubelet SIGKILLs both containers once the grace period is over (a frozen mysqld is killed
//!   where it stopped, never continued: localkube's and the runtimes' stop), or as soon as it
//!   reaches the API server again; 1 to 3 s later the StatefulSet's new pod starts, mysqld
//!   read-only and a sidecar without authority. The process faults of the old pod end with it.

use bloodraven_core::engine::{PodFacts, PodReading};
use bloodraven_core::time::{Duration, Timestamp};
use rand::Rng;

use crate::clock::SimTime;
use crate::network::OPERATOR_NODE;
use crate::trace;
use crate::world::{Event, World, SITE_NAMES};

/// Earliest a hung sidecar reads not ready after it hung (three failed probes).
pub const READINESS_LAG_MILLIS_MIN: u64 = 5_000;
/// Latest a hung sidecar reads not ready after it hung.
pub const READINESS_LAG_MILLIS_MAX: u64 = 7_000;
/// Earliest the StatefulSet's new pod starts after the old one's containers were killed.
const RECREATE_MILLIS_MIN: u64 = 1_000;
/// Latest the StatefulSet's new pod starts.
const RECREATE_MILLIS_MAX: u64 = 3_000;
/// How often a kubelet that could not reach the API server looks again.
const KUBELET_RETRY_MILLIS: u64 = 1_000;

/// One site pod's API object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimPod {
    /// Recreations so far (the uid is `<site>-<generation>`).
    pub generation: u64,
    /// `metadata.creationTimestamp`, on the API server's (the operator's) clock, whole seconds.
    pub created_at: Timestamp,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
    /// The image of its `mysql` container.
    pub image: String,
    /// The image of the StatefulSet's template (what the next pod runs).
    pub template_image: String,
}

impl SimPod {
    /// A pod created at `created_at` (truncated to whole seconds, as the API server stamps).
    pub fn new(generation: u64, created_at: Timestamp) -> SimPod {
        let millis = created_at.0;
        SimPod {
            generation,
            created_at: Timestamp::from_unix_millis(millis - millis.rem_euclid(1000)),
            terminating: false,
            image: crate::update::IMAGE_BEFORE.to_string(),
            template_image: crate::update::IMAGE_BEFORE.to_string(),
        }
    }

    /// `metadata.uid`.
    pub fn uid(&self, site: usize) -> String {
        format!("{}-{}", SITE_NAMES[site], self.generation)
    }
}

impl World {
    /// Whether the site's kubelet reaches the API server (its node reads Ready).
    pub fn kubelet_connected(&self, site: usize) -> bool {
        self.net.connected(OPERATOR_NODE, site)
    }

    /// The sidecar container's readiness as the kubelet reports it.
    pub fn sidecar_ready_per_kubelet(&self, site: usize) -> bool {
        let sidecar = &self.sidecars[site];
        if !sidecar.up() {
            return false;
        }
        match sidecar.hung_since {
            Some((since, lag)) => self.now.millis_since(since) < lag,
            None => true,
        }
    }

    /// The site pod as the operator reads it this poll.
    pub fn pod_reading(&self, site: usize) -> PodReading {
        let pod = &self.pods[site];
        PodReading::Present(PodFacts {
            uid: pod.uid(site),
            created_at: pod.created_at,
            terminating: pod.terminating,
            sidecar_ready: self.sidecar_ready_per_kubelet(site),
            mysql_running: self.sites[site].mysqld_up,
            mysql_image: Some(pod.image.clone()),
            node_ready: Some(self.kubelet_connected(site)),
        })
    }

    /// The operator's `DeletePod`: conditional on the uid; the kubelet acts after `grace`.
    pub fn delete_pod(&mut self, site: usize, uid: &str, grace: Duration) -> bool {
        let grace = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
        self.terminate_pod(
            site,
            uid,
            &format!("deletes pod {uid} (agentless old primary)"),
            |_| grace,
        )
        .is_some()
    }

    /// A pod deletion conditional on `uid`, shared by `DeletePod` and `RollSite`: marks the
    /// pod terminating and schedules the kubelet's kill `kill_in` ms later (asked only when
    /// this call starts the termination, so a repeated deletion changes nothing). `None` when
    /// the uid is not the pod's; `Some(true)` when this call started the termination.
    pub(crate) fn terminate_pod(
        &mut self,
        site: usize,
        uid: &str,
        what: &str,
        kill_in: impl FnOnce(&mut Self) -> u64,
    ) -> Option<bool> {
        if self.pods[site].uid(site) != uid {
            return None;
        }
        if self.pods[site].terminating {
            return Some(false);
        }
        self.pods[site].terminating = true;
        let generation = self.pods[site].generation;
        trace!(self.trace, self.now, "operator", "{what}");
        let delay = kill_in(self);
        self.schedule_in(delay.max(1), Event::PodKill { site, generation });
        Some(true)
    }

    /// The kubelet kills a deleted pod's containers (once it reaches the API server).
    pub fn pod_kill(&mut self, site: usize, generation: u64) {
        if self.pods[site].generation != generation {
            return;
        }
        if !self.kubelet_connected(site) {
            self.schedule_in(KUBELET_RETRY_MILLIS, Event::PodKill { site, generation });
            return;
        }
        trace!(
            self.trace,
            self.now,
            "kubelet",
            "SIGKILLs the containers of pod {}{}",
            self.pods[site].uid(site),
            if self.sites[site].frozen {
                " (mysqld frozen)"
            } else {
                ""
            }
        );
        // The sidecar dies with mysqld: a job it ran is cut off, not failed.
        self.archive_sidecar_stopped(site);
        self.reseed_sidecar_stopped(site);
        if self.sites[site].mysqld_up {
            self.stop_mysqld(site);
        }
        self.stop_sidecar(site);
        self.end_process_faults(site);
        let delay = self
            .rng
            .random_range(RECREATE_MILLIS_MIN..=RECREATE_MILLIS_MAX);
        self.schedule_in(delay, Event::PodRecreate { site, generation });
    }

    /// The StatefulSet's new pod starts: mysqld read-only, a sidecar without authority.
    pub fn pod_recreate(&mut self, site: usize, generation: u64) {
        if self.pods[site].generation != generation {
            return;
        }
        let created = self.operator_now();
        let template = self.pods[site].template_image.clone();
        self.pods[site] = SimPod::new(generation + 1, created);
        self.pods[site].image = template.clone();
        self.pods[site].template_image = template;
        trace!(
            self.trace,
            self.now,
            "kubelet",
            "starts pod {}",
            self.pods[site].uid(site)
        );
        if !self.sites[site].mysqld_up {
            self.start_mysqld(site);
        }
        self.start_sidecar(site);
    }
}

/// The time a hang of a sidecar started and its readiness lag, for [`World::sidecar_ready_per_kubelet`].
pub type HungSince = Option<(SimTime, u64)>;
