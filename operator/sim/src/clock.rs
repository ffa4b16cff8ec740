//! Simulated time: the world's one true clock and the skewed, drifting clocks its processes read.
//!
//! Nothing here reads a real clock (docs/design/style.md#3-time-and-randomness-are-inputs). The
//! world advances [`SimTime`] from event to event; each sidecar reads a [`DriftClock`] (bounded
//! offset and drift, monotonic) and the operator reads a wall clock with a bounded skew.

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

    /// True milliseconds until this clock has advanced by at least `millis`: never early.
    pub fn true_delay_for(&self, millis: u64) -> u64 {
        let rate = 1_000_000 + self.drift_ppm;
        // ceil(millis * 1e6 / rate), plus one for the integer truncation of the reading.
        let rate = u64::try_from(rate).unwrap_or(1_000_000).max(1);
        (millis * 1_000_000).div_ceil(rate) + 1
    }
}

/// Wall-clock milliseconds since the Unix epoch at true time zero (2026-01-01T00:00:00Z).
pub const EPOCH_UNIX_MILLIS: i64 = 1_767_225_600_000;

/// Fixed-point one: uniform draws for [`neg_ln_fixed`] are in `1..=UNIT_FIXED`.
pub const UNIT_FIXED: u64 = 1 << 20;

/// `-ln(u / UNIT_FIXED) * UNIT_FIXED` for `u` in `1..=UNIT_FIXED`, in integer arithmetic.
///
/// log2 is the position of the leading bit plus a linear interpolation of the mantissa (error
/// below 0.09 in log2), then times ln 2. Exact enough to shape exponential waiting times, and
/// identical on every platform, unlike a libm call.
pub fn neg_ln_fixed(u: u64) -> u64 {
    let u = u.clamp(1, UNIT_FIXED);
    let whole = 63 - u64::from(u.leading_zeros());
    // Fractional log2 in 1/UNIT_FIXED: (u / 2^whole - 1), linear between powers of two.
    let fraction = ((u - (1 << whole)) << 20) >> whole;
    let log2_fixed = (whole << 20) + fraction;
    let neg_log2_fixed = (20u64 << 20) - log2_fixed;
    // ln 2 = 0.693147...
    neg_log2_fixed * 693_147 / 1_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    // docs/design/style.md#3-time-and-randomness-are-inputs: waiting times replay bit-for-bit
    // on every platform; the fixed-point -ln stays close to the real one and its mean matches
    // an exponential's.
    #[test]
    fn neg_ln_fixed_approximates_exponential() {
        assert_eq!(neg_ln_fixed(UNIT_FIXED), 0);
        // -ln(1/2) = ln 2 = 0.693147 -> 726_817 in 2^-20 units.
        assert_eq!(neg_ln_fixed(UNIT_FIXED / 2), 726_817);
        let sum: u64 = (1..=UNIT_FIXED).step_by(97).map(neg_ln_fixed).sum();
        let count = (1..=UNIT_FIXED).step_by(97).count() as u64;
        let mean = sum / count;
        // The exponential's mean is 1.0 (= UNIT_FIXED); allow a few percent.
        assert!(
            mean > UNIT_FIXED * 95 / 100 && mean < UNIT_FIXED * 105 / 100,
            "mean {mean}"
        );
    }

    // docs/design/style.md#3-time-and-randomness-are-inputs: a sidecar clock is monotonic and
    // its drift is bounded.
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
