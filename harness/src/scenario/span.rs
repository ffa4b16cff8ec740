//! Durations as scenario files spell them: `20s`, `500ms`, `2m`, `1m30s`, `1h`.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// The longest duration a scenario may ask for; anything longer is a typo, not a test.
pub const SPAN_MAX: Duration = Duration::from_secs(60 * 60);

/// A duration written in a scenario file (`within: 20s`, `sleep: 500ms`).
///
/// The grammar is one or more `<integer><unit>` pairs with units `h`, `m`, `s`, `ms`,
/// largest first, each unit at most once. A bare number has no unit and is rejected,
/// as is zero and anything longer than [`SPAN_MAX`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span(Duration);

impl Span {
    /// Wraps a duration (used by tests and by code that builds scenarios in memory).
    pub const fn new(duration: Duration) -> Self {
        Self(duration)
    }

    /// The duration.
    pub const fn duration(self) -> Duration {
        self.0
    }

    /// Parses the scenario spelling; the error is a sentence fragment naming the problem.
    pub fn parse(text: &str) -> Result<Self, String> {
        const UNITS: [(&str, u64); 4] = [("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1)];
        let text = text.trim();
        if text.is_empty() {
            return Err("empty duration, expected e.g. `20s`, `500ms`, `1m30s`".to_owned());
        }
        let mut rest = text;
        let mut total_ms: u64 = 0;
        let mut last_rank: Option<usize> = None;
        while !rest.is_empty() {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return Err(format!(
                    "invalid duration `{text}`: expected a number at `{rest}`"
                ));
            }
            let (number, after) = rest.split_at(digits);
            let unit_len = after.bytes().take_while(u8::is_ascii_alphabetic).count();
            let (unit, after_unit) = after.split_at(unit_len);
            if unit.is_empty() {
                return Err(format!(
                    "invalid duration `{text}`: `{number}` has no unit (use h, m, s or ms)"
                ));
            }
            let Some(rank) = UNITS.iter().position(|(name, _)| *name == unit) else {
                return Err(format!(
                    "invalid duration `{text}`: unknown unit `{unit}` (use h, m, s or ms)"
                ));
            };
            if last_rank.is_some_and(|last| rank <= last) {
                return Err(format!(
                    "invalid duration `{text}`: units must go from largest to smallest, each once"
                ));
            }
            last_rank = Some(rank);
            let value: u64 = number
                .parse()
                .map_err(|_| format!("invalid duration `{text}`: `{number}` is too large"))?;
            total_ms = value
                .checked_mul(UNITS[rank].1)
                .and_then(|ms| total_ms.checked_add(ms))
                .ok_or_else(|| format!("invalid duration `{text}`: too large"))?;
            rest = after_unit;
        }
        let duration = Duration::from_millis(total_ms);
        if duration.is_zero() {
            return Err(format!(
                "invalid duration `{text}`: must be longer than zero"
            ));
        }
        if duration > SPAN_MAX {
            return Err(format!(
                "invalid duration `{text}`: longer than the 1h maximum"
            ));
        }
        Ok(Self(duration))
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ms = u64::try_from(self.0.as_millis()).unwrap_or(u64::MAX);
        let mut wrote = false;
        for (unit, size) in [("h", 3_600_000u64), ("m", 60_000), ("s", 1_000), ("ms", 1)] {
            if ms >= size {
                write!(f, "{}{unit}", ms / size)?;
                ms %= size;
                wrote = true;
            }
        }
        if !wrote {
            f.write_str("0s")?;
        }
        Ok(())
    }
}

impl Serialize for Span {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SpanVisitor;
        impl Visitor<'_> for SpanVisitor {
            type Value = Span;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as `20s`, `500ms` or `1m30s`")
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<Span, E> {
                Span::parse(value).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<Span, E> {
                Err(E::custom(format!(
                    "invalid duration `{value}`: a bare number has no unit (write e.g. `{value}s`)"
                )))
            }
            fn visit_i64<E: de::Error>(self, value: i64) -> Result<Span, E> {
                Err(E::custom(format!(
                    "invalid duration `{value}`: a bare number has no unit (write e.g. `{value}s`)"
                )))
            }
            fn visit_f64<E: de::Error>(self, value: f64) -> Result<Span, E> {
                Err(E::custom(format!(
                    "invalid duration `{value}`: use whole units such as `1s500ms`"
                )))
            }
        }
        deserializer.deserialize_any(SpanVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // harness.md "Scenario files": durations such as `within: 20s`; bad ones are clear errors.
    #[test]
    fn parses_the_scenario_spellings() {
        assert_eq!(Span::parse("20s"), Ok(Span::new(Duration::from_secs(20))));
        assert_eq!(
            Span::parse("500ms"),
            Ok(Span::new(Duration::from_millis(500)))
        );
        assert_eq!(Span::parse("1m30s"), Ok(Span::new(Duration::from_secs(90))));
        assert_eq!(Span::parse("1h"), Ok(Span::new(Duration::from_secs(3600))));
    }

    #[test]
    fn rejects_bad_durations_with_a_reason() {
        for (text, needle) in [
            ("20", "no unit"),
            ("20sec", "unknown unit"),
            ("s", "expected a number"),
            ("30s1m", "largest to smallest"),
            ("0s", "longer than zero"),
            ("2h", "1h maximum"),
            ("", "empty"),
        ] {
            let error = Span::parse(text).expect_err(text);
            assert!(error.contains(needle), "{text}: {error}");
        }
    }

    #[test]
    fn display_round_trips() {
        for text in ["20s", "500ms", "1m30s", "1h", "2m5s250ms"] {
            let span = Span::parse(text).expect(text);
            assert_eq!(span.to_string(), text);
        }
    }
}
