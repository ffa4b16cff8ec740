//! What makes a lapsed lease mean "cannot write" (operator README, "Fencing"), as the live
//! sidecar and mysqld do it:
//!
//! - **The write deadline** (`bloodraven_mysql::deadline`): a dead man's switch inside mysqld.
//!   The sidecar arms it on every enforcement while its lease counts
//!   ([`writable_for_millis`]: the lease left minus a `SWITCH_PERIOD` and a 100 ms slack, or half
//!   the fence lead when that is shorter); an
//!   event runs every `SWITCH_PERIOD` of mysqld's clock and sets `read_only` once the
//!   deadline has passed. A frozen mysqld runs no event.
//! - **The watchdog** (`bloodraven_core::lease::Watchdog`): every
//!   [`WATCHDOG_CHECK_MILLIS`] of its clock the sidecar asks core's verdict and SIGKILLs a
//!   mysqld that must be read-only, has no lease and was not seen read-only for the grace
//!   (`fence_lead_ms`). The kubelet restarts it read-only after [`MYSQLD_RESTART_MILLIS_MIN`]
//!   to [`MYSQLD_RESTART_MILLIS_MAX`].
//! - **Freeze and hang**: a frozen mysqld (SIGSTOP) executes nothing until thawed or killed; a
//!   hung sidecar executes nothing (no renewal, no fence, no watchdog, no answer) until it
//!   resumes, or until its liveness probe restarts it (`/healthz` times out: 3 failures 10 s
//!   apart, [`LIVENESS_RESTART_MILLIS_MIN`] to [`LIVENESS_RESTART_MILLIS_MAX`] after it hung).

use crate::trace;
use crate::world::{Event, World, SITE_NAMES};
use bloodraven_core::lease::WatchdogVerdict;
use bloodraven_mysql::deadline::SWITCH_PERIOD;
use rand::Rng;

/// How often the sidecar's watchdog checks its verdict (the sidecar's `CHECK_EVERY`).
pub const WATCHDOG_CHECK_MILLIS: u64 = 100;

/// The event scheduler's period for `fence_at_write_deadline`, in milliseconds.
pub const SWITCH_PERIOD_MILLIS: u64 = SWITCH_PERIOD.as_secs() * 1000;

/// Shortest time the kubelet takes to restart a killed mysqld (container restart and InnoDB
/// crash recovery).
pub const MYSQLD_RESTART_MILLIS_MIN: u64 = 2_000;

/// Longest such restart.
pub const MYSQLD_RESTART_MILLIS_MAX: u64 = 8_000;

/// Earliest liveness-probe restart of a hung sidecar after it hung (3 failed probes 10 s apart,
/// the first up to a period after the hang).
pub const LIVENESS_RESTART_MILLIS_MIN: u64 = 25_000;

/// Latest such restart.
pub const LIVENESS_RESTART_MILLIS_MAX: u64 = 40_000;

/// Mutations a hung sidecar's HTTP server queues (accepted by the kernel, served on resume).
pub const QUEUED_MUTATIONS_MAX: usize = 16;

/// How far ahead the sidecar arms mysqld's deadline with `remaining_millis` of lease left and
/// a fence lead of `fence_lead_millis`: `bloodraven_mysql::deadline::writable_for`, which the
/// sidecar uses too (6000 ms lease: 4900).
pub fn writable_for_millis(remaining_millis: u64, fence_lead_millis: u64) -> u64 {
    let writable_for = bloodraven_mysql::deadline::writable_for(
        std::time::Duration::from_millis(remaining_millis),
        std::time::Duration::from_millis(fence_lead_millis),
    );
    u64::try_from(writable_for.as_millis()).unwrap_or(u64::MAX)
}

impl World {
    /// Starts mysqld's event scheduler chain for its current run, at a random phase.
    pub fn start_deadline_switch(&mut self, site: usize) {
        let run = self.sites[site].run;
        let phase = self.rng.random_range(1..=SWITCH_PERIOD_MILLIS);
        self.schedule_in(phase, Event::DeadlineSwitch { site, run });
    }

    /// One run of the event scheduler's `fence_at_write_deadline` on `site`.
    pub fn deadline_switch(&mut self, site: usize, run: u64) {
        if self.sites[site].run != run || !self.sites[site].mysqld_up {
            // A stopped mysqld runs no event; its next run starts its own chain.
            return;
        }
        let delay = self.sites[site].clock.true_delay_for(SWITCH_PERIOD_MILLIS);
        self.schedule_in(delay, Event::DeadlineSwitch { site, run });
        if self.sites[site].run_deadline_event(self.now) {
            self.stats.deadline_fences += 1;
            trace!(
                self.trace,
                self.now,
                SITE_NAMES[site],
                "write deadline passed: mysqld sets read_only itself"
            );
        }
    }

    /// Arms mysqld's write deadline from the lease the sidecar holds now. Returns whether it is
    /// armed (mysqld answered and the switch is installed).
    pub fn arm_write_deadline(&mut self, site: usize) -> bool {
        let mono = self.sidecars[site].mono(self.now);
        let Some(lease) = self.sidecars[site].lease.as_ref() else {
            return false;
        };
        let writable_for = writable_for_millis(
            lease.lease_remaining_ms(mono),
            bloodraven_core::lease::fence_lead_ms(lease.config()),
        );
        let now = self.now;
        self.sites[site].arm_write_deadline(now, writable_for)
    }

    /// The watchdog's periodic check on the sidecar of `site`.
    pub fn watchdog_check(&mut self, site: usize, run: u64) {
        let sidecar = &self.sidecars[site];
        if sidecar.run != run || !sidecar.up() {
            return;
        }
        let delay = sidecar.true_delay_for(WATCHDOG_CHECK_MILLIS);
        let hung = sidecar.hung;
        let mono = sidecar.mono(self.now);
        self.schedule_in(delay, Event::WatchdogCheck { site, run });
        if hung {
            return;
        }
        let sidecar = &mut self.sidecars[site];
        let (Some(lease), Some(watchdog)) = (sidecar.lease.as_ref(), sidecar.watchdog.as_mut())
        else {
            return;
        };
        let verdict = watchdog.check(lease.desired(mono), lease.lease_remaining_ms(mono), mono);
        let WatchdogVerdict::Kill {
            unconfirmed_ms,
            reason,
        } = verdict
        else {
            return;
        };
        watchdog.killed();
        if !self.sites[site].mysqld_up {
            return;
        }
        trace!(
            self.trace,
            self.now,
            SITE_NAMES[site],
            "watchdog SIGKILLs mysqld ({}, not seen read-only for {unconfirmed_ms} ms{})",
            reason.as_str(),
            if self.sites[site].frozen {
                ", frozen"
            } else {
                ""
            }
        );
        self.stats.watchdog_kills += 1;
        self.stop_mysqld(site);
        let run = self.sites[site].run;
        let restart = self
            .rng
            .random_range(MYSQLD_RESTART_MILLIS_MIN..=MYSQLD_RESTART_MILLIS_MAX);
        self.schedule_in(restart, Event::MysqldRestart { site, run });
        self.enforce(site);
    }

    /// mysqld of `site` stops (crash, kill, pod death): writes waiting on it are abandoned.
    pub fn stop_mysqld(&mut self, site: usize) {
        self.archive_mysqld_stopped(site);
        self.reseed_mysqld_stopped(site);
        self.sites[site].crash();
        self.abandon_pending_writes(site);
    }

    /// mysqld of `site` starts again, read-only, with a new event scheduler chain.
    pub fn start_mysqld(&mut self, site: usize) {
        let now = self.now;
        self.sites[site].restart(now);
        self.start_deadline_switch(site);
        // Replication resumes with the relay log it had.
        self.schedule_in(1, Event::RelayApply { site });
    }

    /// The kubelet restarts a mysqld the watchdog killed (unless something else restarted it).
    pub fn mysqld_restart_after_kill(&mut self, site: usize, run: u64) {
        if self.sites[site].run != run || self.sites[site].mysqld_up {
            return;
        }
        if self.faults.mysqld_kept_down(site) {
            // A crash fault keeps it down until it heals.
            return;
        }
        trace!(
            self.trace,
            self.now,
            "kubelet",
            "restarts mysqld on {} after the watchdog's kill (read-only)",
            SITE_NAMES[site]
        );
        self.start_mysqld(site);
    }

    /// SIGSTOP of mysqld on `site`.
    pub fn freeze_mysqld(&mut self, site: usize) {
        self.sites[site].frozen = true;
    }

    /// SIGCONT of mysqld on `site`: it resumes with the `read_only` it had, and the writes
    /// sent into the freeze execute now.
    pub fn thaw_mysqld(&mut self, site: usize) {
        if !self.sites[site].frozen {
            return;
        }
        self.sites[site].frozen = false;
        if !self.sites[site].read_only && !self.sidecars[site].serving() {
            self.checker.on_agentless_thaw_writable();
        }
        trace!(
            self.trace,
            self.now,
            SITE_NAMES[site],
            "mysqld thaws ({}; {} writes were waiting)",
            if self.sites[site].read_only {
                "read-only"
            } else {
                "WRITABLE"
            },
            self.clients.pending[site].len()
        );
        self.release_pending_writes(site);
        self.schedule_in(1, Event::RelayApply { site });
    }

    /// The sidecar of `site` hangs: alive, executing nothing. Its liveness probe restarts it
    /// if it is still hung then.
    pub fn hang_sidecar(&mut self, site: usize) {
        let sidecar = &mut self.sidecars[site];
        if !sidecar.up() || sidecar.hung {
            return;
        }
        sidecar.hung = true;
        sidecar.hang += 1;
        let (run, hang) = (sidecar.run, sidecar.hang);
        let lag = self.rng.random_range(
            crate::kubelet::READINESS_LAG_MILLIS_MIN..=crate::kubelet::READINESS_LAG_MILLIS_MAX,
        );
        self.sidecars[site].hung_since = Some((self.now, lag));
        let restart = self
            .rng
            .random_range(LIVENESS_RESTART_MILLIS_MIN..=LIVENESS_RESTART_MILLIS_MAX);
        self.schedule_in(restart, Event::SidecarLivenessRestart { site, run, hang });
    }

    /// The hung sidecar of `site` resumes where it stopped: the requests its server queued are
    /// served, then it enforces.
    pub fn resume_sidecar(&mut self, site: usize) {
        let sidecar = &mut self.sidecars[site];
        if !sidecar.hung {
            return;
        }
        sidecar.hung = false;
        sidecar.hung_since = None;
        let queued = std::mem::take(&mut sidecar.queued);
        trace!(
            self.trace,
            self.now,
            SITE_NAMES[site],
            "sidecar resumes ({} queued requests)",
            queued.len()
        );
        for mutation in queued {
            self.apply_mutation(&mutation);
        }
        self.enforce(site);
    }

    /// The liveness probe of a still-hung sidecar fails for the third time: the kubelet
    /// restarts it (no cached authority: the startup safety net).
    pub fn sidecar_liveness_restart(&mut self, site: usize, run: u64, hang: u64) {
        let sidecar = &self.sidecars[site];
        if sidecar.run != run || sidecar.hang != hang || !sidecar.hung {
            return;
        }
        trace!(
            self.trace,
            self.now,
            "kubelet",
            "liveness probe restarts the hung sidecar of {}",
            SITE_NAMES[site]
        );
        self.stop_sidecar(site);
        self.start_sidecar(site);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The sidecar's own arithmetic (deadline.rs): 6000 ms of lease -> 4900 ms, nothing below
    // the margin.
    #[test]
    fn the_deadline_lies_a_switch_period_and_a_slack_before_expiry() {
        assert_eq!(writable_for_millis(6000, 1500), 4900);
        assert_eq!(writable_for_millis(1100, 1500), 0);
        assert_eq!(writable_for_millis(500, 1500), 0);
    }
}
