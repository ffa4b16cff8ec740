//! Simulated time: the world's one true clock and the skewed, drifting clocks its processes read.
//!
//! Nothing here reads a real clock (STYLE.md point 3). The world advances [`SimTime`] from event to
//! event; each sidecar reads a [`DriftClock`] (bounded offset and drift, monotonic) and the operator
//! reads a wall clock with a bounded skew.

use std::fmt;

/// Simulated true time in milliseconds since the start of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SimTime(pub u64);

impl SimTime {
    /// Milliseconds since the start of the run.
    pub fn as_millis(self) -> u64 {
        self.0
    }

    /// This instant plus `millis`.
    pub fn plus_millis(self, millis: u64) -> SimTime {
        SimTime(self.0.saturating_add(millis))
    }

    /// Milliseconds from `earlier` to `self`, zero when `earlier` is later.
    pub fn millis_since(self, earlier: SimTime) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:>4}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

/// Largest drift of a sidecar's monotonic clock, in parts per million (a poor crystal is ~100).
pub const DRIFT_PPM_MAX: i64 = 500;

/// Largest offset between the operator's wall clock and true time, in milliseconds.
pub const OPERATOR_SKEW_MILLIS_MAX: i64 = 250;

/// A monotonic clock that runs `drift_ppm` fast or slow against true time from an arbitrary origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriftClock {
    /// Reading at true time zero, in milliseconds (large, so readings never go negative).
    pub origin_millis: u64,
    /// Rate error in parts per million, within `±DRIFT_PPM_MAX`.
    pub drift_ppm: i64,
}

impl DriftClock {
    /// A clock with the given origin and drift; the drift is clamped to `±DRIFT_PPM_MAX`.
    pub fn new(origin_millis: u64, drift_ppm: i64) -> DriftClock {
        DriftClock {
            origin_millis,
            drift_ppm: drift_ppm.clamp(-DRIFT_PPM_MAX, DRIFT_PPM_MAX),
        }
    }

    /// The clock's reading at true time `now`, in milliseconds. Monotonic in `now`.
    pub fn read_millis(&self, now: SimTime) -> u64 {
        let true_millis = i128::from(now.0);
        let scaled = true_millis * i128::from(1_000_000 + self.drift_ppm) / 1_000_000;
        let reading = i128::from(self.origin_millis) + scaled;
        u64::try_from(reading.max(0)).unwrap_or(u64::MAX)
    }
}

/// Wall-clock milliseconds since the Unix epoch at true time zero (2026-01-01T00:00:00Z).
pub const EPOCH_UNIX_MILLIS: i64 = 1_767_225_600_000;

#[cfg(test)]
mod tests {
    use super::*;

    // STYLE.md point 3: a sidecar clock is monotonic and its drift is bounded.
    #[test]
    fn drift_clock_is_monotonic_and_bounded() {
        let fast = DriftClock::new(1_000_000, 10_000);
        assert_eq!(fast.drift_ppm, DRIFT_PPM_MAX);
        let slow = DriftClock::new(1_000_000, -DRIFT_PPM_MAX);
        let mut last = 0;
        for t in (0..600_000).step_by(997) {
            let reading = slow.read_millis(SimTime(t));
            assert!(reading >= last);
            last = reading;
        }
        let elapsed = fast.read_millis(SimTime(600_000)) - fast.read_millis(SimTime(0));
        assert_eq!(elapsed, 600_300);
    }
}
