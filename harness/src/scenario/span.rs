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

use std::cell::Cell;
use std::fmt;
use std::time::Duration;

use jiff::fmt::friendly::{Designator, Spacing, SpanParser, SpanPrinter};
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use super::timing::{Timing, TimingParam};

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

/// A span or a timing expression ([`Expr`]) as a JSON Schema `pattern`.
pub const SPAN_OR_EXPR_PATTERN: &str = concat!(
    "^(?:[0-9]+\\*)?(?:detection|lease|pollInterval|cooldown|",
    span_body!(),
    ")(?: [+-] (?:[0-9]+\\*)?(?:detection|lease|pollInterval|cooldown|",
    span_body!(),
    ")){0,3}$"
);

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
///
/// A span may also be a timing expression over the group's spec (`detection + 1s`,
/// `lease + 10s`, `2*pollInterval`, see [`Expr`]): it is resolved when the scenario is read,
/// against the timing of the run ([`with_timing`]), and remembers how it was written, so a
/// report shows both (`16s (lease + 10s)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    duration: Duration,
    expr: Option<Expr>,
}

/// The most terms a timing expression may have (`detection + lease + 2*pollInterval + 1s`).
pub const EXPR_TERMS_MAX: usize = 4;

/// A timing expression: terms joined by ` + ` and ` - `, each a plain span (`10s`), a timing
/// parameter (`lease`), or a whole multiple of one (`2*pollInterval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Expr {
    terms: [Option<Term>; EXPR_TERMS_MAX],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Term {
    negative: bool,
    factor: u32,
    quantity: Quantity,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Quantity {
    Param(TimingParam),
    Fixed(Duration),
}

thread_local! {
    /// The timing expressions resolve against while a scenario is read ([`with_timing`]).
    static TIMING: Cell<Option<Timing>> = const { Cell::new(None) };
}

/// Runs `read` with timing expressions resolving against `timing` (on this thread); outside
/// it they resolve against the playground's ([`Timing::playground`]).
pub fn with_timing<R>(timing: Timing, read: impl FnOnce() -> R) -> R {
    struct Restore(Option<Timing>);
    impl Drop for Restore {
        fn drop(&mut self) {
            TIMING.with(|cell| cell.set(self.0));
        }
    }
    let _restore = Restore(TIMING.with(|cell| cell.replace(Some(timing))));
    read()
}

/// The timing expressions resolve against now.
fn current_timing() -> Timing {
    TIMING.with(Cell::get).unwrap_or_else(Timing::playground)
}

impl Span {
    /// Wraps a duration (used by tests and by code that builds scenarios in memory).
    pub const fn new(duration: Duration) -> Self {
        Self {
            duration,
            expr: None,
        }
    }

    /// The duration (an expression's, resolved).
    pub const fn duration(self) -> Duration {
        self.duration
    }

    /// The timing expression it was written as, if any.
    pub const fn expr(self) -> Option<Expr> {
        self.expr
    }

    /// Parses the scenario spelling, a timing expression resolving against the current
    /// timing ([`with_timing`]); the error is a sentence fragment naming the problem.
    pub fn parse(text: &str) -> Result<Self, String> {
        Self::parse_with(text, current_timing())
    }

    /// Parses the scenario spelling, a timing expression resolving against `timing`.
    pub fn parse_with(text: &str, timing: Timing) -> Result<Self, String> {
        let text = text.trim();
        if Expr::looks_like(text) {
            let expr = Expr::parse(text)?;
            let duration = expr.resolve(timing)?;
            return Ok(Self {
                duration,
                expr: Some(expr),
            });
        }
        Self::parse_plain(text)
    }

    /// A plain span (`<integer><unit>` pairs).
    fn parse_plain(text: &str) -> Result<Self, String> {
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
        Ok(Self::new(total))
    }
}

impl Expr {
    /// Whether `text` is written as an expression rather than a plain span: it names a
    /// parameter or has an operator.
    fn looks_like(text: &str) -> bool {
        text.contains(['+', '*', ' '])
            || (text.contains('-') && !text.starts_with('-'))
            || TimingParam::ALL
                .iter()
                .any(|param| text.contains(param.name()))
    }

    /// Parses `term (+|- term)*`, operators between spaces.
    fn parse(text: &str) -> Result<Self, String> {
        let names = || {
            TimingParam::ALL
                .iter()
                .map(|param| param.name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut terms = [None; EXPR_TERMS_MAX];
        let mut negative = false;
        let mut count = 0;
        for (index, token) in text.split_whitespace().enumerate() {
            if index % 2 == 1 {
                negative = match token {
                    "+" => false,
                    "-" => true,
                    other => {
                        return Err(format!(
                            "invalid expression `{text}`: expected ` + ` or ` - ` at `{other}`"
                        ))
                    }
                };
                continue;
            }
            if count == EXPR_TERMS_MAX {
                return Err(format!(
                    "invalid expression `{text}`: more than {EXPR_TERMS_MAX} terms"
                ));
            }
            let term = Term::parse(token, negative).map_err(|problem| {
                format!(
                    "invalid expression `{text}`: {problem} (timings: {})",
                    names()
                )
            })?;
            terms[count] = Some(term);
            count += 1;
        }
        if count == 0 || text.split_whitespace().count().is_multiple_of(2) {
            return Err(format!(
                "invalid expression `{text}`: ends with an operator, or is empty"
            ));
        }
        Ok(Self { terms })
    }

    fn terms(&self) -> impl Iterator<Item = Term> + '_ {
        self.terms.iter().flatten().copied()
    }

    /// The expression's value under `timing`: longer than zero and at most [`SPAN_MAX`].
    pub fn resolve(&self, timing: Timing) -> Result<Duration, String> {
        let mut added = Duration::ZERO;
        let mut taken = Duration::ZERO;
        for term in self.terms() {
            let value = match term.quantity {
                Quantity::Param(param) => timing.get(param),
                Quantity::Fixed(duration) => duration,
            }
            .saturating_mul(term.factor);
            if term.negative {
                taken = taken.saturating_add(value);
            } else {
                added = added.saturating_add(value);
            }
        }
        let Some(total) = added.checked_sub(taken).filter(|total| !total.is_zero()) else {
            return Err(format!(
                "expression `{self}` is not longer than zero under this run's timing ({timing})"
            ));
        };
        if total > SPAN_MAX {
            return Err(format!(
                "expression `{self}` is longer than the 1h maximum under this run's timing ({timing})"
            ));
        }
        Ok(total)
    }
}

impl Term {
    fn parse(token: &str, negative: bool) -> Result<Self, String> {
        let (factor, rest) = match token.split_once('*') {
            Some((factor, rest)) => {
                let factor: u32 = factor
                    .parse()
                    .ok()
                    .filter(|factor| *factor > 0)
                    .ok_or_else(|| format!("`{factor}` is not a whole multiple (1 or more)"))?;
                (factor, rest)
            }
            None => (1, token),
        };
        if let Some(param) = TimingParam::from_name(rest) {
            return Ok(Self {
                negative,
                factor,
                quantity: Quantity::Param(param),
            });
        }
        if rest.starts_with(|c: char| c.is_ascii_digit()) {
            let span = Span::parse_plain(rest)?;
            return Ok(Self {
                negative,
                factor,
                quantity: Quantity::Fixed(span.duration),
            });
        }
        Err(format!("unknown timing `{rest}`"))
    }
}

impl fmt::Display for Expr {
    /// As written, normalised: `lease + 10s`, `2*pollInterval`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, term) in self.terms().enumerate() {
            match (index, term.negative) {
                (0, _) => {}
                (_, false) => f.write_str(" + ")?,
                (_, true) => f.write_str(" - ")?,
            }
            if term.factor != 1 {
                write!(f, "{}*", term.factor)?;
            }
            match term.quantity {
                Quantity::Param(param) => f.write_str(param.name())?,
                Quantity::Fixed(duration) => write!(f, "{}", Span::new(duration))?,
            }
        }
        Ok(())
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

impl Span {
    /// The plain spelling of the duration, to the millisecond (`2m5s250ms`; `0s` for zero),
    /// without the expression it was written as.
    pub fn plain(self) -> String {
        let millis = u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX);
        let mut text = String::new();
        // Printing into a String cannot fail.
        let _ = PRINTER.print_unsigned_duration(&Duration::from_millis(millis), &mut text);
        text
    }
}

impl fmt::Display for Span {
    /// The scenario spelling, to the millisecond (`2m5s250ms`; `0s` for zero); an expression
    /// shows resolved, then as written: `16s (lease + 10s)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.plain())?;
        match self.expr {
            Some(expr) => write!(f, " ({expr})"),
            None => Ok(()),
        }
    }
}

/// Here rather than in [`super::timing`], which stays below this module: a timing prints its
/// durations as scenarios spell them.
impl fmt::Display for Timing {
    /// `pollInterval 2s x failureThreshold 3 = detection 6s, lease 6s, cooldown 30s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |duration: Duration| Span::new(duration).plain();
        write!(
            f,
            "pollInterval {} x failureThreshold {} = detection {}, lease {}, cooldown {}",
            show(self.poll_interval),
            self.failure_threshold,
            show(self.detection()),
            show(self.lease),
            show(self.cooldown)
        )
    }
}

/// A string matching [`SPAN_PATTERN`] (the custom `Deserialize` reads a string).
impl schemars::JsonSchema for Span {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Span".into()
    }

    fn json_schema(_generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A duration: `<integer><unit>` pairs with units h, m, s, ms, largest first, each once (`20s`, `500ms`, `1m30s`); longer than zero, at most 1h. Or a timing expression over the group's spec, resolved when the run starts: terms joined by ` + ` and ` - `, each a duration, `detection`, `lease`, `pollInterval` or `cooldown`, optionally a whole multiple (`detection + 1s`, `lease + 10s`, `2*pollInterval`).",
            "type": "string",
            "pattern": SPAN_OR_EXPR_PATTERN,
        })
    }
}

/// The resolved duration, plain: a serialized span reads back under any timing.
impl Serialize for Span {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.plain())
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SpanVisitor;
        impl Visitor<'_> for SpanVisitor {
            type Value = Span;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as `20s`, `500ms` or `1m30s`, or a timing expression such as `lease + 10s`")
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

    // Issue 36: bounds written in terms of the group's spec, resolved when the run starts.
    #[test]
    fn timing_expressions_resolve_against_the_run_s_timing() {
        let playground = Timing::playground();
        let fast = Timing {
            poll_interval: Duration::from_millis(500),
            failure_threshold: 3,
            lease: Duration::from_millis(1500),
            cooldown: Duration::from_secs(30),
        };
        for (text, at_playground, at_fast) in [
            ("detection + 1s", 7_000, 2_500),
            ("detection - pollInterval", 4_000, 1_000),
            ("lease + 10s", 16_000, 11_500),
            ("2*pollInterval", 4_000, 1_000),
            ("cooldown + 2*lease + 500ms", 42_500, 33_500),
            ("detection", 6_000, 1_500),
        ] {
            for (timing, millis) in [(playground, at_playground), (fast, at_fast)] {
                let span = Span::parse_with(text, timing).expect(text);
                assert_eq!(span.duration(), Duration::from_millis(millis), "{text}");
                assert_eq!(
                    span.expr().map(|expr| expr.to_string()).as_deref(),
                    Some(text)
                );
            }
        }
        let span = Span::parse_with("lease + 10s", fast).expect("parses");
        assert_eq!(span.to_string(), "11s500ms (lease + 10s)");
        assert_eq!(serde_json::to_string(&span).expect("json"), "\"11s500ms\"");
        // Without a run's timing, the playground's.
        assert_eq!(
            Span::parse("lease + 10s").expect("parses").duration(),
            Duration::from_secs(16)
        );
        assert_eq!(
            with_timing(fast, || Span::parse("detection")
                .expect("parses")
                .duration()),
            Duration::from_millis(1500)
        );
    }

    #[test]
    fn a_bad_expression_names_its_problem() {
        for (text, needle) in [
            ("leas + 10s", "unknown timing `leas`"),
            ("lease+10s", "unknown timing `lease+10s`"),
            ("lease + ", "ends with an operator"),
            ("lease * 2", "expected ` + ` or ` - ` at `*`"),
            ("0*lease", "not a whole multiple"),
            ("lease + 10", "has no unit"),
            (
                "detection - 10s",
                "not longer than zero under this run's timing (pollInterval 2s",
            ),
            (
                "2*cooldown + 2*cooldown + 2*cooldown",
                "longer than the 1h maximum",
            ),
            ("lease + 1s + 1s + 1s + 1s", "more than 4 terms"),
        ] {
            let cooldown_long = Timing {
                cooldown: Duration::from_secs(15 * 60),
                ..Timing::playground()
            };
            let timing = if text.contains("cooldown") {
                cooldown_long
            } else {
                Timing::playground()
            };
            let error = Span::parse_with(text, timing).expect_err(text);
            assert!(error.contains(needle), "{text}: {error}");
        }
    }

    /// The schema's pattern and the parser agree on what is an expression.
    #[test]
    fn the_schema_pattern_reads_what_the_parser_reads() {
        let pattern = regex::Regex::new(SPAN_OR_EXPR_PATTERN).expect("pattern");
        for text in [
            "20s",
            "lease + 10s",
            "detection - pollInterval",
            "2*pollInterval",
            "cooldown + 2*lease + 500ms",
        ] {
            assert!(pattern.is_match(text), "{text}");
            assert!(Span::parse(text).is_ok(), "{text}");
        }
        for text in ["lease+10s", "leas + 1s", "20", "lease + "] {
            assert!(!pattern.is_match(text), "{text}");
            assert!(Span::parse(text).is_err(), "{text}");
        }
    }
}
