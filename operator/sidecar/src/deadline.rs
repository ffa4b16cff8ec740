//! Arming mysqld's write deadline (`bloodraven_mysql::deadline`): the dead man's switch that
//! fences mysqld when this sidecar is killed, kept down or hangs.
//!
//! While the lease counts for writability, every enforcement moves the deadline to
//! [`writable_for_ms`] ahead, and the enforcer arms it before it ever unfences: a server is
//! writable only with a deadline in the future. A sidecar that stops enforcing stops arming,
//! and mysqld's event fences it within a [`SWITCH_PERIOD`] of the deadline, which lies a
//! [`SWITCH_PERIOD`] and a slack before the lease runs out: mysqld refuses writes before the
//! majority can grant the lease to another site, whatever became of this process.

use std::sync::atomic::Ordering;
use std::time::Duration;

use bloodraven_mysql::deadline::SWITCH_PERIOD;

use crate::state::Shared;

/// Margin for the arming statement's own latency after the lease was read.
const ARM_SLACK_MS: u64 = 100;

/// How far ahead the deadline is armed with `remaining_ms` of lease left: the switch fires at
/// most a [`SWITCH_PERIOD`] after the deadline, so the deadline lies that period and a slack
/// before expiry. With leases of at least 4.4 s (the default is 6 s) it also lies after the
/// instant the enforcer fences on its own (a fence lead, a quarter of the lease, before
/// expiry), so a live sidecar fences first and the switch only acts for a dead one.
pub(crate) fn writable_for_ms(remaining_ms: u64) -> u64 {
    let margin_ms = u64::try_from(SWITCH_PERIOD.as_millis()).unwrap_or(u64::MAX) + ARM_SLACK_MS;
    remaining_ms.saturating_sub(margin_ms)
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
        .arm_write_deadline(|| {
            let remaining_ms = shared.lease().lease_remaining_ms(shared.clock.now());
            Duration::from_millis(writable_for_ms(remaining_ms))
        })
        .await;
    match armed {
        Ok(writable_for) => {
            shared.metrics.write_deadline_armed(writable_for);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_lies_a_switch_period_and_a_slack_before_expiry() {
        assert_eq!(writable_for_ms(6000), 4900);
        assert_eq!(writable_for_ms(1100), 0);
        assert_eq!(writable_for_ms(500), 0);
    }

    #[test]
    fn with_the_default_lease_the_switch_fires_after_the_enforcers_own_fence() {
        // The enforcer fences a fence lead (a quarter) before expiry; the switch may fire from
        // its deadline on. For the default 6 s lease: 4.5 s < 4.9 s <= 6 s - 1 s.
        let lease_ms = 6000;
        let enforcer_fences_at_ms = lease_ms - lease_ms / 4;
        let deadline_ms = writable_for_ms(lease_ms);
        assert!(deadline_ms > enforcer_fences_at_ms);
        assert!(deadline_ms + 1000 <= lease_ms);
    }
}
