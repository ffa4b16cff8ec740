//! Go-style duration strings (`2s`, `5m`, `1h30m`, `500ms`), as Kubernetes APIs write them.

use std::{fmt, str::FromStr, time::Duration};

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{Error, Result};

/// A duration that serialises as a Go duration string (`"2s"`, `"5m"`, `"1h30m"`, `"250ms"`).
///
/// Accepted units: `h`, `m`, `s`, `ms`; components must be in that order, each at most once;
/// every number is below [`GoDuration::NUMBER_LIMIT`] (leading zeros allowed); a bare `0` is
/// zero. [`GoDuration::pattern`] is this grammar as a CRD `pattern`, so the API server refuses
/// exactly what this parser refuses (docs/design/operator.md, "What the API server refuses and
/// what only the operator refuses").
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

    /// Every number of a duration string is below this (9 significant digits), so no sum of
    /// components overflows and the grammar is a regular expression ([`GoDuration::pattern`]).
    pub const NUMBER_LIMIT: u64 = 1_000_000_000;

    /// The CRD `pattern` (RE2, as the API server reads it) matching exactly the strings this
    /// parser accepts whose duration is at least `min_millis` milliseconds (0 to 9): 0 for
    /// any duration, 1 for a positive one. A number is `0*` then at most 9 digits; a duration
    /// is reached through its first component large enough on its own.
    pub fn pattern(min_millis: u8) -> String {
        assert!(
            min_millis <= 9,
            "pattern: min_millis {min_millis} is not 0 to 9"
        );
        // Any number below NUMBER_LIMIT; a positive one; one of at least `min_millis`.
        let any = "0*[0-9]{1,9}";
        let positive = "0*[1-9][0-9]{0,8}";
        let at_least = match min_millis {
            0 | 1 => positive.to_owned(),
            min => format!("0*([{min}-9]|[1-9][0-9]{{1,8}})"),
        };
        let [h, m, s, ms] = [0, 1, 2, 3].map(|index| UNITS[index].0);
        let optional = |unit: &str| format!("({any}{unit})?");
        let alternatives = if min_millis == 0 {
            // A bare 0, or the components from the first one present on.
            vec![
                "0".to_owned(),
                format!("{any}{h}{}{}{}", optional(m), optional(s), optional(ms)),
                format!("{any}{m}{}{}", optional(s), optional(ms)),
                format!("{any}{s}{}", optional(ms)),
                format!("{any}{ms}"),
            ]
        } else {
            // The first nonzero one of h, m and s (then it is at least 1s), or else enough ms.
            vec![
                format!(
                    "{positive}{h}{}{}{}",
                    optional(m),
                    optional(s),
                    optional(ms)
                ),
                format!(
                    "{}{positive}{m}{}{}",
                    optional(h),
                    optional(s),
                    optional(ms)
                ),
                format!(
                    "{}{}{positive}{s}{}",
                    optional(h),
                    optional(m),
                    optional(ms)
                ),
                format!(
                    "{}{}{}{at_least}{ms}",
                    optional(h),
                    optional(m),
                    optional(s)
                ),
            ]
        };
        format!("^({})$", alternatives.join("|"))
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
            let value = number
                .parse::<u128>()
                .ok()
                .filter(|value| *value < u128::from(Self::NUMBER_LIMIT))
                .ok_or_else(|| fail("number too large: every number must be below 1000000000"))?;
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
            "pattern": Self::pattern(0),
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
