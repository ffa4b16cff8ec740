//! The watchdog rule: a lapsed lease must really mean "cannot write".
//!
//! The write rule fences mysqld by `SET GLOBAL read_only = ON`, which needs a mysqld that
//! answers. A frozen (SIGSTOPped, or hung in the kernel) mysqld does not answer; while frozen
//! it cannot commit, but when it thaws after the operator promoted another site it resumes
//! with read_only off and serves the connections it held (issue: fencing under freezes). The
//! operator promotes once the old active site's last grant is older than the lease plus a
//! clock-drift margin, so the old sidecar must have made mysqld unable to write by the time
//! its own lease ran out.
//!
//! The rule, in the sidecar's own terms:
//!
//! 1. **Fence early.** The held lease counts for writability only while more than
//!    [`fence_lead_ms`] of it is left, so a sidecar that stopped renewing starts fencing
//!    before its lease runs out, not at the instant it does (see
//!    [`SiteLease::desired`](super::SiteLease::desired)). A healthy primary renews every
//!    `duration / 3` and never gets this close.
//! 2. **Kill what cannot be fenced.** When mysqld must be read-only, no lease is held, and
//!    mysqld has not been seen read-only (or down) for [`Watchdog::grace_ms`] since that
//!    became so, the sidecar SIGKILLs mysqld (the pod shares its process namespace). SIGKILL
//!    ends a stopped process too; mysqld restarts read-only (it always starts so), and its
//!    crash recovery keeps only what it had made durable: writes no client was told of.
//!    This is Patroni's watchdog, done by the agent that is alive.
//!
//! With the grace no longer than the fence lead, a mysqld that stopped answering before the
//! lead began is killed at the instant the lease runs out, inside the operator's
//! clock-drift margin. An authority-moving notice drops the lease at once, so a frozen old
//! primary whose sidecar hears the notice is killed one grace after it, and its sidecar then
//! reports mysqld down: the operator skips the rest of the lease wait.

use super::{
    clock::MonotonicMillis,
    config::LeaseConfig,
    rule::{ReadOnlyReason, WriteDecision},
};

/// How long before its expiry a held lease stops counting for writability: a quarter of the
/// duration (1.5 s of the default 6 s). Shorter than the lease left after one failed renewal
/// round (renewals run every `duration / 3`, so a round that fails still leaves a third), so
/// a primary that misses one round does not fence; long enough for the sidecar's fence (a
/// `SET GLOBAL read_only` bounded to half the lead, killing client connections, and the set
/// again) to finish before the lease runs out.
pub fn fence_lead_ms(config: &LeaseConfig) -> u64 {
    config.duration_ms() / 4
}

/// The bound the sidecar puts on one unfence (arming mysqld's write deadline and clearing
/// read_only): half the fence lead, the same bound as one fence statement.
pub fn unfence_bound_ms(config: &LeaseConfig) -> u64 {
    fence_lead_ms(config) / 2
}

/// The least lease that must be left for a read-only mysqld to be made writable: the fence
/// lead plus the unfence's own bound ([`unfence_bound_ms`]), 2.25 s of the default 6 s lease.
///
/// The held lease counts for writability until a fence lead before it runs out; an unfence
/// decided with just more than the lead left would land inside the lead, and the fence that
/// follows would have less than the lead to finish before the lease (and the operator's wait)
/// ends. With this margin an unfence that takes its whole bound still lands before the lead
/// begins. A healthy primary renews every `duration / 3` and holds at least two thirds of the
/// lease after each renewal, more than the margin, so only a lease that is about to lapse is
/// refused an unfence; one that is already writable keeps writing until the lead.
pub fn unfence_margin_ms(config: &LeaseConfig) -> u64 {
    fence_lead_ms(config) + unfence_bound_ms(config)
}

/// What the watchdog wants done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchdogVerdict {
    /// Nothing: mysqld is writable by right, or seen read-only or down, or still inside the
    /// grace, or a lease is still held.
    Nothing,
    /// Kill mysqld now: it must not write, no lease covers it, and it has not been seen
    /// read-only for `unconfirmed_ms`.
    Kill {
        /// How long mysqld has been wanted read-only without being seen so.
        unconfirmed_ms: u64,
        /// Why the write rule wants it read-only.
        reason: ReadOnlyReason,
    },
}

/// The watchdog's memory between checks: what mysqld was last seen as, and since when it has
/// been wanted read-only without being seen so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watchdog {
    grace_ms: u64,
    /// The last known fencing state: `Some(true)` read-only or down, `Some(false)` writable,
    /// `None` never seen since the sidecar started.
    seen_read_only: Option<bool>,
    /// When mysqld started to be wanted read-only while not seen read-only.
    unconfirmed_since: Option<MonotonicMillis>,
}

impl Watchdog {
    /// A watchdog whose grace is the fence lead of `config`.
    pub fn new(config: &LeaseConfig) -> Self {
        Self {
            grace_ms: fence_lead_ms(config),
            seen_read_only: None,
            unconfirmed_since: None,
        }
    }

    /// How long mysqld may be wanted read-only and not seen so before it is killed (once no
    /// lease is held).
    pub fn grace_ms(&self) -> u64 {
        self.grace_ms
    }

    /// Records an observation of mysqld. `read_only` is `None` when it could not be read (a
    /// frozen mysqld times out): the last known state stands, since nothing but mysqld itself
    /// answering can show it changed. `down` (connection refused: nothing listens) counts as
    /// read-only: a mysqld that is not running cannot write, and every mysqld starts
    /// read-only.
    pub fn observe(&mut self, read_only: Option<bool>, down: bool) {
        let seen = if down { Some(true) } else { read_only };
        if let Some(seen) = seen {
            self.seen_read_only = Some(seen);
            if seen {
                self.unconfirmed_since = None;
            }
        }
    }

    /// Records that mysqld was killed: the process that might have written is gone, and the
    /// next one starts read-only.
    pub fn killed(&mut self) {
        self.seen_read_only = Some(true);
        self.unconfirmed_since = None;
    }

    /// The verdict at `now`, given what the write rule wants and the lease left.
    ///
    /// A sidecar that never saw mysqld (`None`) treats it as possibly writable: a sidecar
    /// restarted under a frozen, writable mysqld must not leave it so.
    pub fn check(
        &mut self,
        desired: WriteDecision,
        lease_remaining_ms: u64,
        now: MonotonicMillis,
    ) -> WatchdogVerdict {
        let reason = match desired {
            WriteDecision::ReadOnly(reason) if self.seen_read_only != Some(true) => reason,
            WriteDecision::ReadOnly(_) | WriteDecision::Writable => {
                self.unconfirmed_since = None;
                return WatchdogVerdict::Nothing;
            }
        };
        let since = *self.unconfirmed_since.get_or_insert(now);
        let unconfirmed_ms = now.millis_since(since);
        if lease_remaining_ms > 0 || unconfirmed_ms < self.grace_ms {
            return WatchdogVerdict::Nothing;
        }
        WatchdogVerdict::Kill {
            unconfirmed_ms,
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const READ_ONLY: WriteDecision = WriteDecision::ReadOnly(ReadOnlyReason::NoMajorityLease);
    const NOTHING: Option<u64> = None;

    fn watchdog() -> Watchdog {
        let config = LeaseConfig::new(
            "playground",
            "iad",
            ["iad", "pdx", "reader"],
            Duration::from_secs(6),
        );
        match config {
            Ok(config) => Watchdog::new(&config),
            Err(error) => panic!("test config is valid: {error}"),
        }
    }

    /// The verdict at `now_ms` as the unconfirmed time of a kill (`None`: nothing to do);
    /// a kill always carries the write rule's reason.
    fn kill_after(
        dog: &mut Watchdog,
        desired: WriteDecision,
        remaining_ms: u64,
        now_ms: u64,
    ) -> Option<u64> {
        match dog.check(desired, remaining_ms, MonotonicMillis(now_ms)) {
            WatchdogVerdict::Nothing => None,
            WatchdogVerdict::Kill {
                unconfirmed_ms,
                reason,
            } => {
                assert_eq!(WriteDecision::ReadOnly(reason), desired);
                Some(unconfirmed_ms)
            }
        }
    }

    #[test]
    fn frozen_primary_is_killed_when_its_lease_runs_out() {
        let mut dog = watchdog();
        assert_eq!(dog.grace_ms(), 1500);
        dog.observe(Some(false), false);
        // Writable by right: nothing, however long.
        assert_eq!(
            kill_after(&mut dog, WriteDecision::Writable, 4000, 0),
            NOTHING
        );
        // Renewals stopped; the fence lead begins at 1500 ms left; mysqld is frozen, so
        // nothing is observed from here on.
        dog.observe(None, false);
        assert_eq!(kill_after(&mut dog, READ_ONLY, 1500, 4500), NOTHING);
        assert_eq!(kill_after(&mut dog, READ_ONLY, 1, 5999), NOTHING);
        assert_eq!(kill_after(&mut dog, READ_ONLY, 0, 6000), Some(1500));
        dog.killed();
        assert_eq!(kill_after(&mut dog, READ_ONLY, 0, 6100), NOTHING);
    }

    #[test]
    fn a_fence_seen_within_the_grace_kills_nothing() {
        let mut dog = watchdog();
        dog.observe(Some(false), false);
        // Lease dropped at once (authority moving): the grace runs from here.
        assert_eq!(kill_after(&mut dog, READ_ONLY, 0, 100), NOTHING);
        dog.observe(Some(true), false);
        assert_eq!(kill_after(&mut dog, READ_ONLY, 0, 5000), NOTHING);
        // Cleared by hand on a replica: a new grace starts; the enforcer re-fences within it.
        dog.observe(Some(false), false);
        assert_eq!(kill_after(&mut dog, READ_ONLY, 0, 6000), NOTHING);
        assert_eq!(kill_after(&mut dog, READ_ONLY, 0, 7499), NOTHING);
        dog.observe(Some(true), false);
        assert_eq!(kill_after(&mut dog, READ_ONLY, 0, 7600), NOTHING);
    }

    #[test]
    fn moving_notice_with_frozen_mysqld_kills_one_grace_later() {
        let mut dog = watchdog();
        dog.observe(Some(false), false);
        dog.observe(None, false);
        let moving = WriteDecision::ReadOnly(ReadOnlyReason::AuthorityMoving);
        assert_eq!(kill_after(&mut dog, moving, 0, 10_000), NOTHING);
        assert_eq!(kill_after(&mut dog, moving, 0, 11_499), NOTHING);
        assert_eq!(kill_after(&mut dog, moving, 0, 11_500), Some(1500));
    }

    #[test]
    fn a_held_lease_or_down_mysqld_is_never_killed() {
        let mut dog = watchdog();
        dog.observe(Some(false), false);
        // An explicit fence with the lease still held: the operator waits for confirmation,
        // the watchdog does not act.
        let fenced = WriteDecision::ReadOnly(ReadOnlyReason::ExplicitFence);
        assert_eq!(kill_after(&mut dog, fenced, 3000, 0), NOTHING);
        assert_eq!(kill_after(&mut dog, fenced, 3000, 9000), NOTHING);
        // Refused connections: nothing runs, nothing to kill.
        dog.observe(None, true);
        assert_eq!(kill_after(&mut dog, READ_ONLY, 0, 20_000), NOTHING);
    }

    #[test]
    fn never_seen_mysqld_counts_as_possibly_writable() {
        let mut dog = watchdog();
        assert_eq!(kill_after(&mut dog, READ_ONLY, 0, 0), NOTHING);
        assert_eq!(kill_after(&mut dog, READ_ONLY, 0, 1500), Some(1500));
    }
}
