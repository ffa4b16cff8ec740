//! The enforcement loop: observe mysqld, compare with the lease rule, act. It runs every
//! tick (at most a third of the lease), at the instant the held lease stops counting (a fence
//! lead before it expires), and at once when woken (authority pushed, fence, lease gained).

use std::sync::Arc;

use bloodraven_core::lease::{fence_lead_ms, unfence_margin_ms, Enforcement, WriteDecision};

use bloodraven_mysql::deadline::SWITCH_PERIOD;

use crate::{
    deadline,
    observation::{from_snapshot, unreachable},
    state::Shared,
};

/// Runs forever.
pub(crate) async fn run(shared: Arc<Shared>) {
    loop {
        enforce(&shared).await;
        shared.enforced();
        let now = shared.clock.now();
        let remaining_ms = shared.lease().lease_remaining_ms(now);
        let lead_ms = fence_lead_ms(&shared.settings.lease);
        // While mysqld is writable by right, also every switch period: a forward step of
        // mysqld's wall clock fires its write deadline at the event's next run, and the
        // enforcer then finds the primary read-only at most a period later and makes it
        // writable again (`bloodraven_mysql::deadline`, "Forward").
        let period = if shared.lease().desired(now) == WriteDecision::Writable {
            shared.settings.tick.min(SWITCH_PERIOD)
        } else {
            shared.settings.tick
        };
        let next_tick = tokio::time::Instant::now() + period;
        // Wake exactly when the held lease stops counting (a fence lead before it runs out),
        // so a partitioned primary is read-only before its lease ends, and the watchdog finds
        // nothing to kill unless mysqld cannot answer.
        let deadline = if remaining_ms > lead_ms {
            let stops_counting = shared.clock.instant(now)
                + std::time::Duration::from_millis(remaining_ms - lead_ms);
            next_tick.min(stops_counting)
        } else {
            next_tick
        };
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => {}
            () = shared.wake_enforcer.notified() => {}
        }
    }
}

/// One enforcement: observe, decide, act, re-read.
pub(crate) async fn enforce(shared: &Shared) {
    let _serialised = shared.mutation.lock().await;
    let observed = match shared.mysql.observe().await {
        Ok(snapshot) => from_snapshot(&snapshot),
        Err(error) => {
            shared.metrics.mysql_error();
            tracing::warn!(site = shared.site(), %error, "observe mysqld");
            unreachable(&error)
        }
    };
    let observed_read_only = observed.read_only;
    let previously_read_only = shared.last_read_only();
    shared.set_observation(&observed);
    if observed.reachable {
        deadline::ensure_installed(shared).await;
    }
    let now = shared.clock.now();
    let (decided, desired, generation, remaining_ms, unfencing) = {
        let lease = shared.lease();
        let decided = lease.enforcement(now, observed_read_only);
        // Marked in the critical section that decided it: a status read either took its lease
        // snapshot before this decision or sees the mark.
        let unfencing = (decided == Enforcement::SetWritable).then(|| shared.begin_unfence(&lease));
        (
            decided,
            lease.desired(now),
            lease.authority().map(|a| a.topology_generation),
            lease.lease_remaining_ms(now),
            unfencing,
        )
    };
    shared.metrics.observe_lease(remaining_ms, generation);
    match decided {
        Enforcement::AwaitRenewal { lease_remaining_ms } => {
            tracing::debug!(
                site = shared.site(),
                generation,
                lease_remaining_ms,
                unfence_margin_ms = unfence_margin_ms(&shared.settings.lease),
                "not unfencing: too little lease left; waiting for a renewal"
            );
        }
        Enforcement::Nothing | Enforcement::ObserveFirst => {
            // Writable by right: keep mysqld's own deadline ahead of it.
            if desired == WriteDecision::Writable && observed_read_only == Some(false) {
                deadline::arm(shared).await;
            }
        }
        Enforcement::SetReadOnly {
            reason,
            topology_mismatch,
        } => {
            if topology_mismatch {
                shared.metrics.topology_mismatch();
                tracing::warn!(
                    site = shared.site(),
                    generation,
                    read_only = false,
                    reason = reason.as_str(),
                    "topology mismatch: mysqld writable while the cached authority names another site; setting read_only"
                );
            }
            let outcome = fence_now(shared).await;
            shared.metrics.fenced(reason.as_str());
            if observed_read_only == Some(false) {
                shared.metrics.fenced_writable(reason.as_str());
            }
            if let Some(error) = &outcome.error {
                shared.metrics.mysql_error();
                tracing::warn!(site = shared.site(), %error, "set read_only returned an error; re-read");
            }
            tracing::info!(
                site = shared.site(),
                generation,
                read_only = ?outcome.applied.known(),
                lease_held = remaining_ms > 0,
                lease_remaining_ms = remaining_ms,
                reason = reason.as_str(),
                "fenced mysqld"
            );
            if let Some(snapshot) = &outcome.snapshot {
                shared.set_observation(&from_snapshot(snapshot));
            }
        }
        Enforcement::SetWritable => {
            debug_assert_eq!(desired, WriteDecision::Writable);
            if previously_read_only == Some(false) {
                // Writable at the last look, and this sidecar did not fence it (its fences go
                // through `mutation`, held here): mysqld's write deadline fired while the
                // lease counts (a forward step of mysqld's clock), or someone set read_only.
                shared.metrics.mysqld_clock_stepped("fenced_while_leased");
                tracing::warn!(
                    site = shared.site(),
                    generation,
                    lease_remaining_ms = remaining_ms,
                    "mysqld turned read-only while its lease counts (its write deadline fired early, or read_only was set by hand); making it writable again"
                );
            }
            // Never writable without a deadline in the future: a sidecar that dies right after
            // this unfence leaves a mysqld that fences itself.
            if !deadline::arm(shared).await {
                tracing::warn!(
                    site = shared.site(),
                    generation,
                    lease_remaining_ms = remaining_ms,
                    "not making mysqld writable: its write deadline could not be armed"
                );
                return;
            }
            // Arming took time: decide again on the lease left now (a lapsing lease, a moving
            // notice or a fence that arrived meanwhile stops the unfence here).
            let now = shared.clock.now();
            let again = shared.lease().enforcement(now, Some(true));
            if again != Enforcement::SetWritable {
                tracing::info!(
                    site = shared.site(),
                    generation,
                    lease_remaining_ms = shared.lease().lease_remaining_ms(now),
                    decided = ?again,
                    "not making mysqld writable: the rule changed while the write deadline was armed"
                );
                return;
            }
            // Bounded like a fence statement (at most half the fence lead: the unfence bound
            // the margin allows for); a timeout is an unknown, re-read below.
            let outcome = shared.fence_mysql.unfence().await;
            shared.metrics.unfenced();
            if let Some(error) = &outcome.error {
                shared.metrics.mysql_error();
                tracing::warn!(site = shared.site(), %error, "clear read_only returned an error; re-read");
            }
            tracing::info!(
                site = shared.site(),
                generation,
                read_only = ?outcome.applied.known().map(|writable| !writable),
                lease_held = true,
                lease_remaining_ms = remaining_ms,
                "made mysqld writable: authority names this site and a majority lease is held"
            );
            if let Some(snapshot) = &outcome.snapshot {
                shared.set_observation(&from_snapshot(snapshot));
            }
            drop(unfencing);
        }
    }
}

/// Sets read-only with a short bound; if that did not apply (SET GLOBAL read_only waits for
/// clients' table locks, and a lock holder must not keep a site writable past its lease),
/// kills client connections and fences again. Returns the last outcome, re-read.
pub(crate) async fn fence_now(shared: &Shared) -> bloodraven_mysql::live::MutationOutcome {
    let outcome = shared.fence_mysql.fence().await;
    if outcome.is_applied() {
        return outcome;
    }
    tracing::warn!(
        site = shared.site(),
        applied = ?outcome.applied,
        error = outcome.error.as_ref().map(ToString::to_string),
        "set read_only did not apply; killing client connections and fencing again"
    );
    match shared
        .mysql
        .kill_client_connections(&shared.protected_users())
        .await
    {
        Ok(killed) => tracing::info!(
            site = shared.site(),
            killed,
            "killed client connections to fence"
        ),
        Err(error) => tracing::warn!(site = shared.site(), %error, "kill client connections"),
    }
    shared.fence_mysql.fence().await
}
