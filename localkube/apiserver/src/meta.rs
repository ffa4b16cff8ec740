//! Object metadata helpers: timestamps (Time and MicroTime, trap 10), names, uids.

use jiff::{SignedDuration, Timestamp};
use rand::Rng;
use serde_json::Value;

/// A `metav1.Time` string: RFC 3339 in UTC, whole seconds (truncated), `Z`.
pub fn time(timestamp: Timestamp) -> String {
    format!("{timestamp:.0}")
}

/// The current time as `metav1.Time`.
pub fn now() -> String {
    time(Timestamp::now())
}

/// A `metav1.MicroTime` string: exactly 6 fractional digits (truncated), `Z` (trap 10).
pub fn micro_time(timestamp: Timestamp) -> String {
    format!("{timestamp:.6}")
}

/// Parses a Time or MicroTime (RFC 3339, any offset; `t` or a space may separate date and
/// time). Fractional digits past the ninth are ignored, as Go's and chrono's parsers do.
pub fn parse_time(text: &str) -> Option<Timestamp> {
    text.parse()
        .ok()
        .or_else(|| nanosecond_precision(text)?.parse().ok())
}

/// `s` with its fractional seconds cut to 9 digits, if it has more.
fn nanosecond_precision(text: &str) -> Option<String> {
    let dot = text.find('.')?;
    let digits = text[dot + 1..]
        .bytes()
        .take_while(u8::is_ascii_digit)
        .count();
    (digits > 9).then(|| format!("{}{}", &text[..dot + 10], &text[dot + 1 + digits..]))
}

/// `t` moved by `seconds` (negative: earlier), saturating at jiff's range (years -9999 to
/// 9999) where a Kubernetes duration field is absurdly large.
pub fn add_seconds(timestamp: Timestamp, seconds: i64) -> Timestamp {
    timestamp
        .saturating_add(SignedDuration::from_secs(seconds))
        .unwrap_or(timestamp)
}

/// Whole seconds from `earlier` to `later`, truncated towards zero (negative if `later` is
/// before `earlier`).
pub fn seconds_between(earlier: Timestamp, later: Timestamp) -> i64 {
    later.duration_since(earlier).as_secs()
}

/// Whole seconds from `t` until now (an age).
pub fn seconds_since(timestamp: Timestamp) -> i64 {
    seconds_between(timestamp, Timestamp::now())
}

/// Rewrites the MicroTime field at `pointer` to exactly 6 fractional digits.
pub fn normalize_micro_time(obj: &mut Value, pointer: &str) {
    if let Some(value) = obj.pointer_mut(pointer) {
        if let Some(timestamp) = value.as_str().and_then(parse_time) {
            *value = Value::String(micro_time(timestamp));
        }
    }
}

/// The 5-character random suffix of `generateName`.
pub fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// A new uid.
pub fn uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A string field of an object by JSON pointer.
pub fn str_at<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `metadata.name`.
pub fn name(obj: &Value) -> &str {
    str_at(obj, "/metadata/name")
}

/// `metadata.namespace`.
pub fn namespace(obj: &Value) -> &str {
    str_at(obj, "/metadata/namespace")
}

/// `metadata.uid`.
pub fn uid_of(obj: &Value) -> &str {
    str_at(obj, "/metadata/uid")
}

/// Whether a DNS-1123 subdomain (object names).
pub fn valid_subdomain(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 253
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && text
            .chars()
            .next()
            .map(|c| c.is_ascii_alphanumeric())
            .unwrap_or(false)
        && text
            .chars()
            .last()
            .map(|character| character.is_ascii_alphanumeric())
            .unwrap_or(false)
}

/// Human duration as kubectl prints ages (`5s`, `3m20s`, `4h`, `2d`).
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let seconds = secs.max(0);
    let (minutes, hours, days) = (seconds / 60, seconds / 3600, seconds / 86400);
    if seconds < 120 {
        format!("{seconds}s")
    } else if minutes < 10 {
        if seconds % 60 == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{}s", seconds % 60)
        }
    } else if minutes < 180 {
        format!("{minutes}m")
    } else if hours < 8 {
        if minutes % 60 == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{}m", minutes % 60)
        }
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        if hours % 24 == 0 {
            format!("{days}d")
        } else {
            format!("{days}d{}h", hours % 24)
        }
    } else if hours < 24 * 365 * 2 {
        format!("{days}d")
    } else {
        format!("{}y", days / 365)
    }
}

/// Age of an object from its creationTimestamp.
pub fn age(obj: &Value) -> String {
    match parse_time(str_at(obj, "/metadata/creationTimestamp")) {
        Some(timestamp) => human_duration(seconds_since(timestamp)),
        None => "<unknown>".into(),
    }
}

/// The strings of the array at `pointer` (none when it is missing).
pub fn strings_at<'a>(obj: &'a Value, pointer: &str) -> Vec<&'a str> {
    obj.pointer(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trap10_micro_time_has_six_fractional_digits() {
        let mut value = serde_json::json!({"spec": {"renewTime": "2026-01-02T03:04:05.1Z"}});
        normalize_micro_time(&mut value, "/spec/renewTime");
        assert_eq!(
            value.pointer("/spec/renewTime").and_then(Value::as_str),
            Some("2026-01-02T03:04:05.100000Z")
        );
        let mut w = serde_json::json!({"spec": {"acquireTime": "2026-01-02T03:04:05Z"}});
        normalize_micro_time(&mut w, "/spec/acquireTime");
        assert_eq!(
            w.pointer("/spec/acquireTime").and_then(Value::as_str),
            Some("2026-01-02T03:04:05.000000Z")
        );
    }

    fn at(text: &str) -> Timestamp {
        parse_time(text).expect(text)
    }

    #[test]
    fn time_is_rfc3339_whole_seconds_in_utc() {
        assert_eq!(
            time(at("2026-01-02T03:04:05.999999999Z")),
            "2026-01-02T03:04:05Z"
        );
        assert_eq!(
            time(at("2026-01-02T04:04:05+01:00")),
            "2026-01-02T03:04:05Z"
        );
        assert_eq!(time(at("1999-12-31T23:59:59Z")), "1999-12-31T23:59:59Z");
        let now = now();
        assert_eq!(now.len(), "2026-01-02T03:04:05Z".len(), "{now}");
        assert!(now.ends_with('Z') && !now.contains('.'), "{now}");
    }

    #[test]
    fn micro_time_truncates_to_six_digits_in_utc() {
        assert_eq!(
            micro_time(at("2026-01-02T03:04:05.123456789Z")),
            "2026-01-02T03:04:05.123456Z"
        );
        assert_eq!(
            micro_time(at("2026-01-02T01:04:05.5-02:00")),
            "2026-01-02T03:04:05.500000Z"
        );
        let now = micro_time(Timestamp::now());
        assert_eq!(now.len(), "2026-01-02T03:04:05.123456Z".len(), "{now}");
    }

    #[test]
    fn parse_time_takes_what_rfc3339_parsers_take() {
        let timestamp = at("2026-01-02T03:04:05Z");
        assert_eq!(at("2026-01-02t03:04:05z"), timestamp);
        assert_eq!(at("2026-01-02 03:04:05Z"), timestamp);
        assert_eq!(
            micro_time(at("2026-01-02T03:04:05.1234567891234Z")),
            "2026-01-02T03:04:05.123456Z"
        );
        for bad in [
            "",
            "yesterday",
            "2026-01-02T03:04:05",
            "2026-13-02T03:04:05Z",
        ] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn seconds_arithmetic_truncates_and_saturates() {
        let timestamp = at("2026-01-02T03:04:05Z");
        assert_eq!(seconds_between(timestamp, at("2026-01-02T03:05:06.9Z")), 61);
        assert_eq!(seconds_between(timestamp, at("2026-01-02T03:04:03.5Z")), -1);
        assert_eq!(time(add_seconds(timestamp, 3600)), "2026-01-02T04:04:05Z");
        assert_eq!(time(add_seconds(timestamp, -5)), "2026-01-02T03:04:00Z");
        assert_eq!(add_seconds(timestamp, i64::MAX), Timestamp::MAX);
        assert_eq!(add_seconds(timestamp, i64::MIN), Timestamp::MIN);
    }

    #[test]
    fn human_durations_match_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(200), "3m20s");
        assert_eq!(human_duration(3600 * 5), "5h");
        assert_eq!(human_duration(86400 * 3), "3d");
    }
}
