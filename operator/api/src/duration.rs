//! Go-style duration strings (`2s`, `5m`, `1h30m`, `500ms`), as Kubernetes APIs write them.

use std::{fmt, str::FromStr, time::Duration};

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{Error, Result};

/// A duration that serialises as a Go duration string (`"2s"`, `"5m"`, `"1h30m"`, `"250ms"`).
///
/// Accepted units: `h`, `m`, `s`, `ms`; components must be in that order; a bare `0` is zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct GoDuration(pub Duration);

impl GoDuration {
    /// A duration of `seconds` whole seconds.
    pub const fn from_secs(seconds: u64) -> Self {
        Self(Duration::from_secs(seconds))
    }

    /// The duration as a [`std::time::Duration`].
    pub const fn get(self) -> Duration {
        self.0
    }
}

impl From<Duration> for GoDuration {
    fn from(value: Duration) -> Self {
        Self(value)
    }
}

const UNITS: [(&str, u128); 4] = [("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1)];

impl FromStr for GoDuration {
    type Err = Error;

    fn from_str(input: &str) -> Result<Self> {
        let fail = |reason: &str| Error::Duration {
            input: input.to_string(),
            reason: reason.to_string(),
        };
        if input == "0" {
            return Ok(Self(Duration::ZERO));
        }
        if input.is_empty() {
            return Err(fail("empty"));
        }
        let mut rest = input;
        let mut total_ms: u128 = 0;
        let mut last_unit_index: Option<usize> = None;
        while !rest.is_empty() {
            let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
            if digits == 0 {
                return Err(fail("expected a number"));
            }
            let (number, after) = rest.split_at(digits);
            let value: u128 = number.parse().map_err(|_| fail("number too large"))?;
            let unit_len = after
                .chars()
                .take_while(|c| c.is_ascii_alphabetic())
                .count();
            let (unit, after_unit) = after.split_at(unit_len);
            let index = UNITS
                .iter()
                .position(|(name, _)| *name == unit)
                .ok_or_else(|| fail("unit must be one of h, m, s, ms"))?;
            if last_unit_index.is_some_and(|last| index <= last) {
                return Err(fail("units must appear once, largest first"));
            }
            last_unit_index = Some(index);
            total_ms = value
                .checked_mul(UNITS[index].1)
                .and_then(|ms| ms.checked_add(total_ms))
                .ok_or_else(|| fail("duration too large"))?;
            rest = after_unit;
        }
        let millis = u64::try_from(total_ms).map_err(|_| fail("duration too large"))?;
        Ok(Self(Duration::from_millis(millis)))
    }
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ms = self.0.as_millis();
        if ms == 0 {
            return f.write_str("0s");
        }
        for (name, size) in UNITS {
            if ms >= size {
                write!(f, "{}{}", ms / size, name)?;
                ms %= size;
            }
        }
        Ok(())
    }
}

impl Serialize for GoDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for GoDuration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "GoDuration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^(0|([0-9]+h)?([0-9]+m)?([0-9]+s)?([0-9]+ms)?)$",
            "description": "A Go duration: 2s, 5m, 1h30m, 500ms."
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_design_defaults() {
        assert_eq!(
            "2s".parse::<GoDuration>().unwrap().get(),
            Duration::from_secs(2)
        );
        assert_eq!(
            "5m".parse::<GoDuration>().unwrap().get(),
            Duration::from_secs(300)
        );
        assert_eq!(
            "1h30m".parse::<GoDuration>().unwrap().get(),
            Duration::from_secs(5400)
        );
        assert_eq!(
            "1500ms".parse::<GoDuration>().unwrap().to_string(),
            "1s500ms"
        );
        assert_eq!("0".parse::<GoDuration>().unwrap().get(), Duration::ZERO);
    }

    #[test]
    fn bad_durations_name_what_was_wrong() {
        for (text, reason) in [
            ("", "empty"),
            ("5", "unit"),
            ("s", "number"),
            ("2d", "unit"),
            ("1s1m", "largest first"),
            ("99999999999999999999999h", "large"),
        ] {
            let error = text.parse::<GoDuration>().unwrap_err().to_string();
            assert!(error.contains(reason), "{text:?}: {error}");
        }
    }

    #[test]
    fn display_round_trips() {
        for ms in [0u64, 1, 999, 1000, 61_001, 3_600_000, 5_400_250] {
            let duration = GoDuration(Duration::from_millis(ms));
            assert_eq!(
                duration.to_string().parse::<GoDuration>().unwrap(),
                duration
            );
        }
    }
}
