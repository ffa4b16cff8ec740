//! [`Timestamp`]: wall-clock time as unix milliseconds, serialised as RFC 3339.

use std::{fmt, ops::Add, str::FromStr, time::Duration};

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{Error, Result};

/// A wall-clock instant in milliseconds since the unix epoch (UTC).
///
/// Serialises as RFC 3339 (`2026-11-30T02:55:58.123Z`). Nothing in this crate reads a clock:
/// the operator shell creates timestamps from `SystemTime`, the simulator from its own clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// The instant `unix_millis` milliseconds after the unix epoch.
    pub const fn from_unix_millis(unix_millis: i64) -> Self {
        Self(unix_millis)
    }

    /// Milliseconds since the unix epoch.
    pub const fn unix_millis(self) -> i64 {
        self.0
    }

    /// How long after `earlier` this instant is; zero if it is not after it.
    pub fn saturating_duration_since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }

    /// This instant minus `duration`, saturating at the far past.
    pub fn saturating_sub(self, duration: Duration) -> Timestamp {
        Timestamp(self.0.saturating_sub(millis(duration)))
    }
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

impl Add<Duration> for Timestamp {
    type Output = Timestamp;

    fn add(self, rhs: Duration) -> Timestamp {
        Timestamp(self.0.saturating_add(millis(rhs)))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match jiff::Timestamp::from_millisecond(self.0) {
            Ok(ts) => write!(f, "{ts:.3}"),
            Err(_) => write!(f, "<out of range: {} ms>", self.0),
        }
    }
}

impl FromStr for Timestamp {
    type Err = Error;

    fn from_str(input: &str) -> Result<Self> {
        let ts: jiff::Timestamp = input.parse().map_err(|e: jiff::Error| Error::Timestamp {
            input: input.to_string(),
            reason: e.to_string(),
        })?;
        Ok(Self(ts.as_millisecond()))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for Timestamp {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Timestamp".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string", "format": "date-time"})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trip_with_milliseconds() {
        let ts = Timestamp::from_unix_millis(1_796_007_358_123);
        let text = ts.to_string();
        assert_eq!(text, "2026-11-30T02:55:58.123Z");
        assert_eq!(text.parse::<Timestamp>().unwrap(), ts);
        assert_eq!(
            "2026-11-30T02:55:58Z"
                .parse::<Timestamp>()
                .unwrap()
                .unix_millis()
                % 1000,
            0
        );
    }

    #[test]
    fn bad_timestamp_names_the_input() {
        let error = "yesterday".parse::<Timestamp>().unwrap_err().to_string();
        assert!(error.contains("yesterday"), "{error}");
    }

    #[test]
    fn arithmetic_saturates() {
        let ts = Timestamp(1_000);
        assert_eq!((ts + Duration::from_secs(2)).0, 3_000);
        assert_eq!(
            ts.saturating_duration_since(Timestamp(5_000)),
            Duration::ZERO
        );
        assert_eq!(
            Timestamp(5_000).saturating_duration_since(ts),
            Duration::from_secs(4)
        );
    }
}
