//! Arming mysqld's write deadline (`bloodraven_mysql::deadline`): the dead man's switch that
//! fences mysqld when this sidecar is killed, kept down or hangs.
//!
//! While the lease counts for writability, every enforcement moves the deadline to
//! [`writable_for_lease`] ahead, and the enforcer arms it before it ever unfences: a server is
//! writable only with a deadline in the future. A sidecar that stops enforcing stops arming,
//! and mysqld's event fences it within a [`SWITCH_PERIOD`] of the deadline, which lies after
//! this sidecar's own fence and early enough that mysqld refuses writes before the operator's
//! lease wait ends (`bloodraven_mysql::deadline::writable_for`), whatever became of this
//! process.
//!
//! The switch runs on mysqld's wall clock, the lease on this sidecar's monotonic one. Every arm
//! therefore also reads mysqld's clock against the monotonic clock and compares it with the
//! previous arm's reading (`bloodraven_mysql::deadline::clock_step`; the argument for each
//! direction is in that module's docs): after a backward step the event is created again (the
//! scheduler would not run it until mysqld's clock is back where it was), after a forward step
//! the enforcer is woken at once (the switch may have fenced a primary whose lease counts; the
//! usual rule makes it writable again).

use std::sync::atomic::Ordering;
use std::time::Duration;

use bloodraven_core::lease::{fence_lead_ms, LeaseConfig};
use bloodraven_mysql::deadline::{
    clock_step, reinstall_after, writable_for, ClockReading, ClockStep, SWITCH_PERIOD,
};

use crate::state::Shared;

/// How far ahead the deadline is armed with `remaining_ms` of lease left
/// (`bloodraven_mysql::deadline::writable_for`, with this lease's fence lead).
pub(crate) fn writable_for_lease(lease: &LeaseConfig, remaining_ms: u64) -> Duration {
    writable_for(
        Duration::from_millis(remaining_ms),
        Duration::from_millis(fence_lead_ms(lease)),
    )
}

/// Installs the switch if this run has not yet (on every server, replicas included: a replica
/// whose read_only is cleared by hand while its sidecar is down fences itself too). Returns
/// whether it is installed.
pub(crate) async fn ensure_installed(shared: &Shared) -> bool {
    if shared.deadline_installed.load(Ordering::SeqCst) {
        return true;
    }
    if let Err(error) = shared.fence_mysql.install_write_deadline().await {
        shared.metrics.write_deadline_failed();
        tracing::warn!(site = shared.site(), %error, "install the write deadline in mysqld");
        return false;
    }
    tracing::info!(
        site = shared.site(),
        period_ms = u64::try_from(SWITCH_PERIOD.as_millis()).unwrap_or(u64::MAX),
        "installed the write deadline in mysqld"
    );
    shared.deadline_installed.store(true, Ordering::SeqCst);
    true
}

/// Installs the switch if needed, then arms it from the lease left now. Returns whether the
/// deadline is armed; `false` means mysqld must not be made writable (and a writable one will
/// fence itself at its previous deadline).
pub(crate) async fn arm(shared: &Shared) -> bool {
    if !ensure_installed(shared).await {
        return false;
    }
    let armed = shared
        .fence_mysql
        .arm_write_deadline(
            || {
                let remaining_ms = shared.lease().lease_remaining_ms(shared.clock.now());
                writable_for_lease(&shared.settings.lease, remaining_ms)
            },
            || shared.clock.now().0,
        )
        .await;
    match armed {
        Ok(armed) => {
            shared.metrics.write_deadline_armed(armed.writable_for);
            after_clock_read(shared, armed.clock).await;
            true
        }
        Err(error) => {
            // A recreated datadir has no table: install again on the next enforcement.
            shared.deadline_installed.store(false, Ordering::SeqCst);
            shared.metrics.write_deadline_failed();
            tracing::warn!(site = shared.site(), %error, "arm the write deadline in mysqld");
            false
        }
    }
}

/// Compares mysqld's clock at this arm with the last arm's and acts on a step.
async fn after_clock_read(shared: &Shared, latest: ClockReading) {
    let previous = shared
        .mysqld_clock
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .replace(latest);
    let Some(previous) = previous else {
        return;
    };
    let step = clock_step(&previous, &latest);
    match step {
        ClockStep::Steady => {}
        ClockStep::Forward(by) => {
            shared.metrics.mysqld_clock_stepped("forward");
            tracing::warn!(
                site = shared.site(),
                step_ms = millis(by),
                "mysqld's wall clock stepped forward: its write deadline may have fenced it early; re-armed on the new clock, enforcing again"
            );
            shared.wake_enforcer.notify_one();
        }
        ClockStep::Backward(by) => {
            shared.metrics.mysqld_clock_stepped("backward");
            tracing::warn!(
                site = shared.site(),
                step_ms = millis(by),
                "mysqld's wall clock stepped backward: re-armed on the new clock; creating the write deadline's event again so the scheduler runs it"
            );
        }
    }
    if reinstall_after(step) {
        shared.deadline_installed.store(false, Ordering::SeqCst);
        if ensure_installed(shared).await {
            // The event is re-created; the armed row is kept (`INSERT IGNORE`).
            return;
        }
        // Not re-created: keep the reading from before the step, so that the next arm sees
        // the step again and tries once more.
        shared
            .mysqld_clock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .replace(previous);
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(duration_ms: u64) -> LeaseConfig {
        LeaseConfig::new(
            "playground",
            "iad",
            ["iad", "pdx", "reader"],
            Duration::from_millis(duration_ms),
        )
        .expect("lease config")
    }

    #[test]
    fn with_the_default_lease_the_switch_fires_after_the_enforcers_own_fence_and_before_expiry() {
        // The enforcer fences a fence lead (a quarter) before expiry: 4.5 s of 6 s. The deadline
        // is 4.9 s, and the switch fires by 5.9 s.
        let config = lease(6000);
        let deadline = writable_for_lease(&config, 6000);
        assert_eq!(deadline, Duration::from_millis(4900));
        assert!(deadline > Duration::from_millis(6000 - fence_lead_ms(&config)));
        assert!(deadline + SWITCH_PERIOD <= Duration::from_millis(6000));
    }
}
