//! The agent outside the pod: an old primary whose sidecar is gone is killed by its kubelet
//! before the promotion (docs/design/history.md#issue-10-the-agentless-primary).
//!
//! Inside the pod, two agents keep a demoted primary from acknowledging writes: the sidecar
//! (its enforcer fences, its watchdog kills a mysqld it cannot fence) and mysqld's own write
//! deadline. A mysqld that freezes while its sidecar dies or hangs defeats both: the deadline
//! runs inside the frozen process and the watchdog inside the dead one, and a mysqld that
//! thaws after the promotion serves its held connections writable. The lease wait cannot
//! help, since it proves only that the lease is over, not that anybody acted on it.
//!
//! The kubelet can act: it kills a pod's containers on deletion, and SIGKILL ends a stopped
//! process. So while an emergency failover is in flight the operator asks it to, for the old
//! active site's pod, when:
//!
//! - the operator cannot reach that site's sidecar, or it answers but its kubelet does not
//!   call it ready (a sidecar that answers and passes its probes is alive, and its watchdog
//!   covers a frozen mysqld; one just started again, not yet probed, may be killed again the
//!   next moment: an outside agent keeping it down does exactly that),
//! - the pod was created before the move was announced (a pod created after it started with
//!   a sidecar without authority, and is never granted a lease of the old generation),
//! - the kubelet reports the mysql container running (a frozen process runs; a crashed one
//!   restarts read-only) and the sidecar container not ready (crashed, killed, or hung and
//!   failing its `/healthz` probe), and
//! - its node does not report `NotReady` (a kubelet may be there to carry the deletion out;
//!   a node that could not be read is no proof there is none), and
//! - the move's candidate is not the old site itself (promoted back as the last resort, it is
//!   the site being made writable, not an old primary to silence).
//!
//! A hung sidecar is still "ready" at its kubelet until its readiness probe failed three
//! times ([`SIDECAR_NOT_READY_WITHIN`]): until the operator has not reached the sidecar for
//! that long, a kubelet's "ready" does not tell a partitioned sidecar (alive, and fencing
//! mysqld itself) from a hung one, and the promotion waits for it to tell (on a partition,
//! this wait ends about when the lease wait does).
//!
//! A pod of the old run that is already terminating (this rule's deletion, or anyone's) holds
//! the promotion until its kubelet has removed it, whatever its sidecar answers meanwhile: a
//! frozen mysqld in it may be continued inside the grace period and serve its held
//! connections (s029 through the fault agent).
//!
//! The deletion is conditional on the pod's uid and has a grace period of
//! [`AGENTLESS_KILL_GRACE`]; the promotion waits until no pod of the old run is left (the API
//! server removes a gracefully deleted pod only once its kubelet reported the containers
//! stopped), or until [`AGENTLESS_KILL_PATIENCE`] past the lease wait bound, when it promotes
//! on the lease alone and says so (`AgentlessPrimaryNotKilled`). A partitioned primary is
//! untouched: its kubelet reports its sidecar ready (the probe is local), or on a real cluster
//! nothing at all, and its live sidecar fences it within the lease.

use super::action::{Action, EventReason};
use super::lease_wait::lease_wait_bound;
use super::memory::{EmergencyFailover, EmergencyPhase, GroupMemory};
use super::observation::{PodFacts, PodReading};
use super::options::{AGENTLESS_KILL_GRACE, AGENTLESS_KILL_PATIENCE, SIDECAR_NOT_READY_WITHIN};
use super::plan::{Context, Plan};

/// What the kubelet says of the old active site's sidecar, this poll.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum OldAgent<'a> {
    /// Nothing for this rule: the sidecar answers the operator and its kubelet calls it ready,
    /// no pod of the old run with a running mysql container is left, the pod could not be
    /// read, or its node reports NotReady (nobody could carry a kill out: the lease rule
    /// alone).
    NotApplicable,
    /// The kubelet reports the silent sidecar ready, but it has not been silent for
    /// [`SIDECAR_NOT_READY_WITHIN`] yet: a hang may not show yet.
    Undecided,
    /// The kubelet reports it ready although it has been silent that long: it is alive
    /// (partitioned from the operator) and fences mysqld itself.
    Alive,
    /// The kubelet reports it not ready (gone: crashed, killed, hung, or just started again
    /// and not yet probed), or the pod of the old run is terminating. Its pod is deleted (once)
    /// and the promotion waits until it is gone.
    Gone(&'a PodFacts),
}

/// The old active site's agent as its kubelet reports it (see the module docs).
pub(super) fn old_agent<'a>(
    context: &'a Context<'_>,
    memory: &GroupMemory,
    failover: &EmergencyFailover,
) -> OldAgent<'a> {
    if context.options.unsafe_skip_agentless_kill || moves_back_to_old_site(failover) {
        return OldAgent::NotApplicable;
    }
    let Some(site) = context
        .observation
        .sites
        .iter()
        .find(|site| site.site == failover.from)
    else {
        return OldAgent::NotApplicable;
    };
    let pod = match &site.pod {
        // A node that reports NotReady has nobody to carry a kill out; one whose condition
        // could not be read this poll may well have (s029 live: pdx was promoted 250 ms into
        // the old pod's grace period, its frozen mysqld alive with SIGTERM pending).
        PodReading::Present(pod)
            if pod.created_at < failover.announced_at && pod.node_ready != Some(false) =>
        {
            pod
        }
        PodReading::Present(_) | PodReading::Absent | PodReading::Unknown => {
            return OldAgent::NotApplicable;
        }
    };
    // A pod of the old run that terminates is a kill in flight (this rule's, or anyone's):
    // until its kubelet has removed it, a frozen mysqld in it may still be continued and serve
    // its held connections, whatever a sidecar in it answers. s029 through the fault agent: the
    // killed sidecar was started again by its kubelet and answered one poll before it was
    // killed again, and pdx was promoted 280 ms into the grace period.
    if pod.terminating {
        return OldAgent::Gone(pod);
    }
    if !pod.mysql_running {
        return OldAgent::NotApplicable;
    }
    if context.view(&failover.from).sidecar_up {
        // A sidecar that answers is alive and its watchdog covers a frozen mysqld, once its
        // kubelet vouches for it: one it does not call ready was just (re)started and not yet
        // probed, or fails its health check, and may be gone again the next moment.
        return if pod.sidecar_ready {
            OldAgent::NotApplicable
        } else {
            OldAgent::Gone(pod)
        };
    }
    if !pod.sidecar_ready {
        return OldAgent::Gone(pod);
    }
    let silent_for = memory
        .site(&failover.from)
        .and_then(|site| site.sidecar_unreachable_since)
        .map(|since| context.now.saturating_duration_since(since));
    if silent_for.is_some_and(|silent| silent >= SIDECAR_NOT_READY_WITHIN) {
        OldAgent::Alive
    } else {
        OldAgent::Undecided
    }
}

/// The failover's candidate is its own old site (promoted back as the last resort when no
/// other site qualifies): no other site will be made writable over it, so its mysqld is not
/// an old primary to silence but the one being promoted, and deleting its pod would delete
/// the site the same decision names in the authority (simulator seed 489). A new move away
/// from it later is a new failover, announced anew, and the rule applies to it again.
fn moves_back_to_old_site(failover: &EmergencyFailover) -> bool {
    let candidate = match &failover.phase {
        EmergencyPhase::AwaitingLeaseExpiry => None,
        EmergencyPhase::CatchingUp { to, .. }
        | EmergencyPhase::Draining { to, .. }
        | EmergencyPhase::Promoting { to } => Some(to),
    };
    candidate.is_some_and(|to| *to == failover.from)
}

/// Asks the kubelet to kill the old active site's pod when its agent is gone (a `DeletePod`
/// conditional on its uid; nothing while it is already terminating), and returns what the
/// kubelet says of the agent.
pub(super) fn kill_agentless_old_primary<'a>(
    context: &'a Context<'_>,
    memory: &GroupMemory,
    failover: &EmergencyFailover,
    plan: &mut Plan,
) -> OldAgent<'a> {
    let agent = old_agent(context, memory, failover);
    if let OldAgent::Gone(pod) = agent {
        if !pod.terminating {
            let name = bloodraven_api::names::pod(context.group(), &failover.from);
            plan.cross_site(Action::DeletePod {
                site: failover.from.clone(),
                pod: name.clone(),
                uid: pod.uid.clone(),
                grace: AGENTLESS_KILL_GRACE,
            });
            plan.event(
                EventReason::AgentlessPrimaryKilled,
                format!(
                    "{}'s sidecar is unreachable and its kubelet reports it not ready: deleting pod {name} (uid {}) so that its kubelet kills mysqld before the promotion",
                    failover.from, pod.uid
                ),
            );
        }
    }
    agent
}

/// Why the promotion must still wait although the lease is over, if it must: the kubelet has
/// not yet told a hung sidecar from a partitioned one, or it has not yet removed the pod of a
/// gone one (until [`AGENTLESS_KILL_PATIENCE`] past the lease wait bound, counted from the
/// move's announcement; past it a Warning Event says the promotion goes ahead on the lease).
pub(super) fn promotion_held(
    context: &Context<'_>,
    failover: &EmergencyFailover,
    agent: OldAgent<'_>,
    plan: &mut Plan,
) -> Option<String> {
    match agent {
        OldAgent::NotApplicable | OldAgent::Alive => None,
        OldAgent::Undecided => Some(format!(
            "{}'s lease is over, but its sidecar has been silent for less than {:?} and its kubelet reports it ready: waiting for the readiness probe to tell a hung sidecar from a partitioned one",
            failover.from, SIDECAR_NOT_READY_WITHIN
        )),
        OldAgent::Gone(pod) => {
            let give_up_at =
                failover.announced_at + lease_wait_bound(context) + AGENTLESS_KILL_PATIENCE;
            if context.now < give_up_at {
                return Some(format!(
                    "{}'s lease is over, but its sidecar is gone: waiting for its kubelet to remove pod uid {} before promoting",
                    failover.from, pod.uid
                ));
            }
            plan.event(
                EventReason::AgentlessPrimaryNotKilled,
                format!(
                    "{}'s pod (uid {}) was not removed within {:?} of the lease wait bound (kubelet down, or pods/delete denied?): promoting on the lease alone, a frozen mysqld there may serve its held connections when it thaws",
                    failover.from, pod.uid, AGENTLESS_KILL_PATIENCE
                ),
            );
            None
        }
    }
}
