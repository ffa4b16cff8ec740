//! The sidecar's own monotonic clock, fed into the pure lease rule.

use bloodraven_core::lease::MonotonicMillis;
use tokio::time::Instant;

/// Milliseconds since the sidecar started, on tokio's monotonic clock (paused in tests).
#[derive(Debug, Clone, Copy)]
pub(crate) struct MonotonicClock {
    origin: Instant,
}

impl MonotonicClock {
    /// A clock starting now.
    pub(crate) fn start() -> Self {
        Self {
            origin: Instant::now(),
        }
    }

    /// Now on this clock.
    pub(crate) fn now(&self) -> MonotonicMillis {
        MonotonicMillis(u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX))
    }

    /// The tokio instant of `at` on this clock.
    pub(crate) fn instant(&self, at: MonotonicMillis) -> Instant {
        self.origin + std::time::Duration::from_millis(at.0)
    }
}

/// Wall-clock now, for status timestamps and the freshness of signed requests (no lease
/// decision reads it).
pub(crate) fn wall_now() -> bloodraven_api::Timestamp {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    bloodraven_api::Timestamp::from_unix_millis(millis)
}
