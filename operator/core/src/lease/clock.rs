//! One sidecar's monotonic clock, as an input.

use std::{fmt, time::Duration};

use serde::{Deserialize, Serialize};

/// Milliseconds on one sidecar's own monotonic clock, from an arbitrary origin.
///
/// Values from different sidecars are not comparable: a lease is measured only on the
/// requester's clock, a grant's age only on the granter's.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct MonotonicMillis(pub u64);

impl MonotonicMillis {
    /// This instant plus `duration`, saturating.
    pub fn saturating_add(self, duration: Duration) -> MonotonicMillis {
        MonotonicMillis(self.0.saturating_add(duration_millis(duration)))
    }

    /// Milliseconds from `earlier` to `self`; zero if `earlier` is not before `self`.
    pub fn millis_since(self, earlier: MonotonicMillis) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

impl fmt::Display for MonotonicMillis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

/// `duration` in whole milliseconds, saturating at `u64::MAX`.
pub(crate) fn duration_millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
