//! Durations as scenario files spell them: `20s`, `500ms`, `2m`, `1m30s`, `1h`.
//!
//! # Over jiff
//!
//! What a spelling means is jiff's: every `<integer><unit>` component is read by jiff's
//! friendly duration parser ([`SpanParser`]) and a span prints with jiff's friendly printer
//! ([`SpanPrinter`]: compact designators, no spaces), so `h`, `m`, `s` and `ms` mean here what
//! they mean everywhere else jiff is used. The grammar is this module's own: jiff's friendly
//! format accepts far more than a scenario may say (`20 secs`, `1.5s`, `-5s`, `5s ago`,
//! `1h, 30m`, `01:30:00`, days and weeks), and its errors do not say which part of a scenario's
//! spelling is wrong (tests and scenario files rely on these messages). So [`Span::parse`]
//! checks each component against the scenario grammar first, in order, with its own messages,
//! and hands jiff only the component in its plain form.
//!
//! The value is a [`std::time::Duration`], what the runner sleeps and measures with, and what
//! jiff's [`SpanParser::parse_unsigned_duration`] returns: a `jiff::Span` carries calendar units
//! and compares field by field (no `Ord` or `Hash`), and a `jiff::SignedDuration` is signed where
//! a scenario's span never is.

use std::fmt;
use std::time::Duration;

use jiff::fmt::friendly::{Designator, Spacing, SpanParser, SpanPrinter};
use jiff::fmt::StdFmtWrite;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// The longest duration a scenario may ask for; anything longer is a typo, not a test.
pub const SPAN_MAX: Duration = Duration::from_secs(60 * 60);

/// The units a scenario may write, largest first (the order they must appear in).
const UNITS: [&str; 4] = ["h", "m", "s", "ms"];

/// The grammar of a span as a regular expression without anchors (for [`SPAN_PATTERN`] and
/// [`OFFSET_PATTERN`]): `<integer><unit>` pairs, units `h`, `m`, `s`, `ms`, largest first,
/// each at most once. Zero and the [`SPAN_MAX`] bound are beyond it.
macro_rules! span_body {
    () => {
        r"(?:[0-9]+h(?:[0-9]+m)?(?:[0-9]+s)?(?:[0-9]+ms)?|[0-9]+m(?:[0-9]+s)?(?:[0-9]+ms)?|[0-9]+s(?:[0-9]+ms)?|[0-9]+ms)"
    };
}

/// A span's spelling as a JSON Schema `pattern` (scenarios/schema.json).
pub const SPAN_PATTERN: &str = concat!("^", span_body!(), "$");

/// A signed offset's spelling (`clock-offset`, `clockOffset`: `+20s`, `-1500ms`, `0`) as a
/// JSON Schema `pattern`.
pub const OFFSET_PATTERN: &str = concat!("^(?:0|[+-]", span_body!(), ")$");

/// jiff's friendly duration parser: the value of each checked component.
static PARSER: SpanParser = SpanParser::new();

/// jiff's friendly printer as scenarios spell spans: `1m30s`, `500ms`, `0s`.
static PRINTER: SpanPrinter = SpanPrinter::new()
    .designator(Designator::Compact)
    .spacing(Spacing::None);

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
        let text = text.trim();
        if text.is_empty() {
            return Err("empty duration, expected e.g. `20s`, `500ms`, `1m30s`".to_owned());
        }
        let too_large = || format!("invalid duration `{text}`: too large");
        let mut rest = text;
        let mut total = Duration::ZERO;
        let mut last_rank: Option<usize> = None;
        while !rest.is_empty() {
            let (component, after) = next_component(text, rest, &mut last_rank)?;
            // Jiff's duration holds more than a scenario's total may (milliseconds in a u64).
            let value = PARSER
                .parse_unsigned_duration(&component)
                .map_err(|_| too_large())?;
            total = total
                .checked_add(value)
                .filter(|total| u64::try_from(total.as_millis()).is_ok())
                .ok_or_else(too_large)?;
            rest = after;
        }
        if total.is_zero() {
            return Err(format!(
                "invalid duration `{text}`: must be longer than zero"
            ));
        }
        if total > SPAN_MAX {
            return Err(format!(
                "invalid duration `{text}`: longer than the 1h maximum"
            ));
        }
        Ok(Self(total))
    }
}

/// The scenario grammar's check of the component at the start of `rest` (of the whole
/// `text`): a number, then a known unit smaller than the one before. Returns the component
/// in plain form for jiff (`<u64><unit>`: no leading zeros past what jiff reads) and what
/// follows it.
fn next_component<'a>(
    text: &str,
    rest: &'a str,
    last_rank: &mut Option<usize>,
) -> Result<(String, &'a str), String> {
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
    let Some(rank) = UNITS.iter().position(|name| *name == unit) else {
        return Err(format!(
            "invalid duration `{text}`: unknown unit `{unit}` (use h, m, s or ms)"
        ));
    };
    if last_rank.is_some_and(|last| rank <= last) {
        return Err(format!(
            "invalid duration `{text}`: units must go from largest to smallest, each once"
        ));
    }
    *last_rank = Some(rank);
    let value: u64 = number
        .parse()
        .map_err(|_| format!("invalid duration `{text}`: `{number}` is too large"))?;
    Ok((format!("{value}{unit}"), after_unit))
}

impl fmt::Display for Span {
    /// The scenario spelling, to the millisecond (`2m5s250ms`; `0s` for zero).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let millis = u64::try_from(self.0.as_millis()).unwrap_or(u64::MAX);
        PRINTER
            .print_unsigned_duration(&Duration::from_millis(millis), StdFmtWrite(f))
            .map_err(|_| fmt::Error)
    }
}

/// A string matching [`SPAN_PATTERN`] (the custom `Deserialize` reads a string).
impl schemars::JsonSchema for Span {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Span".into()
    }

    fn json_schema(_generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A duration: `<integer><unit>` pairs with units h, m, s, ms, largest first, each once (`20s`, `500ms`, `1m30s`); longer than zero, at most 1h.",
            "type": "string",
            "pattern": SPAN_PATTERN,
        })
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

    // docs/design/harness.md#scenario-files: durations such as `within: 20s`; bad ones are clear
    // errors.
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
            // The overflow boundaries: a number past u64, a total past u64 milliseconds.
            (
                "99999999999999999999s",
                "`99999999999999999999` is too large",
            ),
            ("18446744073709551s616ms", ": too large"),
            ("5124095576031h", ": too large"),
            ("18446744073709551s615ms", "1h maximum"),
            ("5124095576030h", "1h maximum"),
            ("18446744073709551615ms", "1h maximum"),
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

    /// jiff's friendly format reads all of these; the scenario grammar reads none of them.
    #[test]
    fn rejects_what_only_the_friendly_format_accepts() {
        for text in [
            "20 s", "20secs", "1.5s", "-5s", "+5s", "5s ago", "1h, 30m", "1h 30m", "01:30:00",
            "1d", "1w",
        ] {
            assert!(Span::parse(text).is_err(), "{text}");
        }
    }

    /// Leading zeros past the 20 digits jiff's parser reads still parse.
    #[test]
    fn leading_zeros_still_parse() {
        assert_eq!(
            Span::parse("0000000000000000000000020s"),
            Ok(Span::new(Duration::from_secs(20)))
        );
    }
}
