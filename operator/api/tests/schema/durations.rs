//! The duration `pattern`s of the CRD accept exactly what `GoDuration`'s parser accepts at
//! their minimum: a table of the cases that matter, then random strings built to sit near the
//! grammar's edges.

use std::{str::FromStr, sync::OnceLock, time::Duration};

use bloodraven_api::{GoDuration, WRITE_LEASE_MIN_MILLIS};
use proptest::prelude::*;
use regex::Regex;

use crate::{group_crd, SPEC};

/// The parser's verdict: the duration, when it parses.
fn parsed(text: &str) -> Option<Duration> {
    GoDuration::from_str(text).ok().map(GoDuration::get)
}

/// The three duration patterns of the group CRD, read from the generated schema, with the
/// least duration each must accept (compiled once).
fn field_patterns() -> &'static [(&'static str, Regex, Duration)] {
    static PATTERNS: OnceLock<Vec<(&'static str, Regex, Duration)>> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let crd = group_crd();
        [
            ("/properties/pollInterval/pattern", Duration::from_millis(1)),
            ("/properties/failoverCooldown/pattern", Duration::ZERO),
            (
                "/properties/writeLease/properties/duration/pattern",
                Duration::from_millis(u64::from(WRITE_LEASE_MIN_MILLIS)),
            ),
        ]
        .into_iter()
        .map(|(at, min)| {
            let pointer = format!("{SPEC}{at}");
            let pattern = crd
                .pointer(&pointer)
                .and_then(|p| p.as_str())
                .unwrap_or_else(|| panic!("no {pointer} in the CRD"));
            (at, Regex::new(pattern).expect("pattern compiles"), min)
        })
        .collect()
    })
}

/// `GoDuration::pattern(min)` for `min` 0 to 9, compiled once.
fn pattern_at_least(min: u8) -> &'static Regex {
    static PATTERNS: OnceLock<Vec<Regex>> = OnceLock::new();
    &PATTERNS.get_or_init(|| {
        (0..=9)
            .map(|min| Regex::new(&GoDuration::pattern(min)).expect("pattern compiles"))
            .collect()
    })[usize::from(min)]
}

fn agree(patterns: &[(&'static str, Regex, Duration)], text: &str) {
    let verdict = parsed(text);
    for (at, regex, min) in patterns {
        let parser_accepts = verdict.is_some_and(|d| d >= *min);
        assert_eq!(
            regex.is_match(text),
            parser_accepts,
            "{at} and the parser disagree on {text:?} (parser: {verdict:?}, least {min:?})"
        );
    }
}

#[test]
fn duration_patterns_accept_exactly_what_the_parser_accepts() {
    // (text, any duration, positive, at least the 3ms write lease)
    let table: &[(&str, bool, bool, bool)] = &[
        ("", false, false, false),
        ("0", true, false, false),
        ("00", false, false, false),
        ("0s", true, false, false),
        ("0h0m0s0ms", true, false, false),
        ("000ms", true, false, false),
        ("1ms", true, true, false),
        ("2ms", true, true, false),
        ("3ms", true, true, true),
        ("0h0m0s3ms", true, true, true),
        ("0003ms", true, true, true),
        ("10ms", true, true, true),
        ("2s", true, true, true),
        ("5m", true, true, true),
        ("1h30m", true, true, true),
        ("1h0m0s0ms", true, true, true),
        ("1s500ms", true, true, true),
        ("0s1ms", true, true, false),
        ("999999999h", true, true, true),
        ("0000000000999999999h", true, true, true),
        ("1000000000ms", false, false, false),
        ("99999999999999999999999h", false, false, false),
        ("fast", false, false, false),
        ("5", false, false, false),
        ("s", false, false, false),
        ("2d", false, false, false),
        ("1s1m", false, false, false),
        ("1m1m", false, false, false),
        ("1ms1s", false, false, false),
        ("1.5s", false, false, false),
        ("-1s", false, false, false),
        ("+1s", false, false, false),
        (" 1s", false, false, false),
        ("1s ", false, false, false),
        ("1s\n", false, false, false),
        ("1S", false, false, false),
        ("1us", false, false, false),
        ("1mss", false, false, false),
        ("1h 30m", false, false, false),
    ];
    let patterns = field_patterns();
    for &(text, any, positive, lease) in table {
        let verdict = parsed(text);
        assert_eq!(verdict.is_some(), any, "parser on {text:?}: {verdict:?}");
        assert_eq!(verdict.is_some_and(|d| !d.is_zero()), positive, "{text:?}");
        assert_eq!(
            verdict.is_some_and(|d| d >= Duration::from_millis(3)),
            lease,
            "{text:?}"
        );
        agree(patterns, text);
    }
}

/// A number as a duration string writes it: zero-padded, near zero, near the limit or past it.
fn number() -> impl Strategy<Value = String> {
    let value = prop_oneof![
        Just(0u64),
        1u64..10,
        0u64..GoDuration::NUMBER_LIMIT,
        GoDuration::NUMBER_LIMIT - 10..GoDuration::NUMBER_LIMIT + 10,
        GoDuration::NUMBER_LIMIT..u64::MAX,
    ];
    (0usize..4, value).prop_map(|(zeros, value)| format!("{}{value}", "0".repeat(zeros)))
}

/// A piece of a duration string: a number, a unit (good or not) or a stray character.
fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => number(),
        4 => prop::sample::select(vec!["h", "m", "s", "ms"]).prop_map(str::to_owned),
        1 => prop::sample::select(vec!["us", "ns", "d", "H", "M", "S", "mss", ""]).prop_map(str::to_owned),
        1 => prop::sample::select(vec![".", "-", "+", " ", "\n", "0", "00", "x"]).prop_map(str::to_owned),
    ]
}

/// Components in unit order, each present or not, zero or not; sometimes shuffled.
fn well_formed() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(prop::option::of(number()), 4),
        any::<bool>(),
    )
        .prop_map(|(numbers, reverse)| {
            let mut parts: Vec<String> = numbers
                .into_iter()
                .zip(["h", "m", "s", "ms"])
                .filter_map(|(n, unit)| n.map(|n| format!("{n}{unit}")))
                .collect();
            if reverse {
                parts.reverse();
            }
            parts.concat()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn random_token_strings_agree(tokens in prop::collection::vec(token(), 0..7)) {
        agree(field_patterns(), &tokens.concat());
    }

    #[test]
    fn random_well_formed_strings_agree(text in well_formed()) {
        agree(field_patterns(), &text);
    }

    /// `GoDuration::pattern(min)` for every minimum it takes, not only the three the CRD uses.
    #[test]
    fn every_minimum_agrees(min in 0u8..=9, text in prop_oneof![well_formed(), prop::collection::vec(token(), 0..5).prop_map(|t| t.concat())]) {
        let regex = pattern_at_least(min);
        let parser_accepts = parsed(&text).is_some_and(|d| d >= Duration::from_millis(u64::from(min)));
        prop_assert_eq!(regex.is_match(&text), parser_accepts, "min {}ms, {:?}", min, text);
    }

    /// What a duration displays as parses back, and so matches the patterns it is above.
    #[test]
    fn displayed_durations_match(ms in prop_oneof![0u64..10, 0u64..100_000_000_000, 0u64..3_600_000_000_000_000]) {
        let duration = GoDuration(Duration::from_millis(ms));
        let text = duration.to_string();
        prop_assert_eq!(parsed(&text), Some(duration.get()));
        agree(field_patterns(), &text);
    }
}
