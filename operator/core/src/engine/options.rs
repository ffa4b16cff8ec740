//! [`DecideOptions`] and the engine's named bounds.

use crate::time::Duration;

/// Margin added to the write lease duration before the operator treats the old active
/// site's lease as lapsed.
///
/// A peer reports how long ago it last granted the old site a lease, on the peer's monotonic
/// clock; the old site measures its lease from the moment it *sent* the request, on its own
/// clock, so its lease always ends no later than `duration` after the peer's grant as the
/// peer measures it — provided both clocks run at the same rate. The margin covers the rate
/// difference of two monotonic clocks over one lease (well under 1 ms for NTP-disciplined
/// clocks at 6 s), the time the old sidecar needs to execute `SET GLOBAL read_only` after its
/// lease lapses (a local statement: milliseconds), and scheduling hiccups of the old sidecar
/// process (a paused VM or a long GC-free stall): one full second is generous for all three
/// while adding only a sixth to the default 6 s wait.
pub const CLOCK_DRIFT_MARGIN: Duration = Duration::from_secs(1);

/// How long the candidate's sidecar may wait for its relay log to drain in one `Promote`
/// call (`PromoteRequest::timeout_ms`). The call is repeated on later polls until the
/// detachment is observed.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// How many polls a candidate may stay in `Draining` (emergency) without being observed
/// detached before the engine gives up on it and selects another candidate.
pub const DRAIN_POLLS_MAX: u32 = 10;

/// How long a planned failover may stay in `Draining` (old primary fenced, waiting for it to
/// be confirmed read-only and for the target to converge) before it is aborted and the old
/// site re-asserted.
pub const PLANNED_DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

/// Options of [`decide_with_options`](super::decide_with_options).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecideOptions {
    /// TEST ONLY. Promote without waiting for the old active site's lease to lapse (and
    /// without its sidecar's confirmation). This is the split-brain bug the lease wait
    /// prevents; the simulator turns it on to prove its checkers catch split brain. Never set
    /// by the operator.
    #[doc(hidden)]
    pub unsafe_skip_lease_wait: bool,
    /// TEST ONLY. Never ask the kubelet to kill an agentless old primary, and promote on the
    /// lease alone (the rule before the agentless kill of
    /// docs/design/history.md#issue-10-the-agentless-primary): the simulator turns it on to
    /// show that its `SplitBrain(frozen+agentless)` finding comes back. Never set by the
    /// operator.
    #[doc(hidden)]
    pub unsafe_skip_agentless_kill: bool,
}

/// `gracePeriodSeconds` of the deletion of an agentless old primary's pod: the kubelet sends
/// SIGTERM, and SIGKILL (which ends a stopped, frozen process too) once it passes. Not 0: a
/// zero grace period is a force deletion, which removes the object without waiting for the
/// kubelet, and the object's disappearance is the proof the rule waits for.
pub const AGENTLESS_KILL_GRACE: Duration = Duration::from_secs(1);

/// The sidecar container's readiness probe (`/healthz`), rendered by the operator's workloads
/// from these: a period, a timeout and the failures in a row that make it not ready.
pub const SIDECAR_READINESS_PERIOD: Duration = Duration::from_secs(2);
/// See [`SIDECAR_READINESS_PERIOD`].
pub const SIDECAR_READINESS_TIMEOUT: Duration = Duration::from_secs(1);
/// See [`SIDECAR_READINESS_PERIOD`].
pub const SIDECAR_READINESS_FAILURES: u32 = 3;

/// How long after a sidecar stops answering its kubelet reports it not ready, at the latest:
/// the probes' window (the last passing probe just before the hang, then `FAILURES` probes a
/// period apart, the last one failing a timeout after it started) plus a second for the
/// status to reach the API server. Until a silent sidecar has been silent this long, its
/// kubelet's "ready" does not yet tell a partitioned sidecar (alive, fencing) from a hung one
/// (`engine::agentless`).
pub const SIDECAR_NOT_READY_WITHIN: Duration = Duration::from_secs(
    SIDECAR_READINESS_PERIOD.as_secs() * SIDECAR_READINESS_FAILURES as u64
        + SIDECAR_READINESS_TIMEOUT.as_secs()
        + 1,
);

/// How long past the lease wait bound an emergency failover waits for the kubelet to carry
/// out the deletion of an agentless old primary before it promotes on the lease alone (with a
/// Warning Event): the kubelet, or the permission to delete pods, failed too, and holding the
/// promotion for ever would turn one more failure into an outage without end.
pub const AGENTLESS_KILL_PATIENCE: Duration = Duration::from_secs(30);

/// How long a planned failover may wait in `Admitting` for its target to be a healthy,
/// converged replica before it is rejected.
pub const PLANNED_ADMISSION_TIMEOUT: Duration = Duration::from_secs(300);

/// Tolerance when comparing mysqld start times across polls: `MysqldRun::started_at` is
/// derived from a whole-second `Uptime`, so the same run can appear to start up to a second
/// apart.
pub const MYSQLD_START_JITTER: Duration = Duration::from_secs(2);
