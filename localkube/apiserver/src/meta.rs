//! Object metadata helpers: timestamps (Time and MicroTime, trap 10), names, uids.

use chrono::{DateTime, SecondsFormat, Utc};
use rand::Rng;
use serde_json::Value;

/// A `metav1.Time` string (RFC 3339, seconds).
pub fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The current time as `metav1.Time`.
pub fn now() -> String {
    time(Utc::now())
}

/// A `metav1.MicroTime` string: exactly 6 fractional digits (trap 10).
pub fn micro_time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// Parses a Time or MicroTime.
pub fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// Rewrites the MicroTime field at `pointer` to exactly 6 fractional digits.
pub fn normalize_micro_time(obj: &mut Value, pointer: &str) {
    if let Some(v) = obj.pointer_mut(pointer) {
        if let Some(t) = v.as_str().and_then(parse_time) {
            *v = Value::String(micro_time(t));
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
pub fn valid_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && s.chars()
            .next()
            .map(|c| c.is_ascii_alphanumeric())
            .unwrap_or(false)
        && s.chars()
            .last()
            .map(|c| c.is_ascii_alphanumeric())
            .unwrap_or(false)
}

/// Human duration as kubectl prints ages (`5s`, `3m20s`, `4h`, `2d`).
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let s = secs.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86400);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s % 60 == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{}s", s % 60)
        }
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        if h % 24 == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{}h", h % 24)
        }
    } else if h < 24 * 365 * 2 {
        format!("{d}d")
    } else {
        format!("{}y", d / 365)
    }
}

/// Age of an object from its creationTimestamp.
pub fn age(obj: &Value) -> String {
    match parse_time(str_at(obj, "/metadata/creationTimestamp")) {
        Some(t) => human_duration((Utc::now() - t).num_seconds()),
        None => "<unknown>".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trap10_micro_time_has_six_fractional_digits() {
        let mut v = serde_json::json!({"spec": {"renewTime": "2026-01-02T03:04:05.1Z"}});
        normalize_micro_time(&mut v, "/spec/renewTime");
        assert_eq!(
            v.pointer("/spec/renewTime").and_then(Value::as_str),
            Some("2026-01-02T03:04:05.100000Z")
        );
        let mut w = serde_json::json!({"spec": {"acquireTime": "2026-01-02T03:04:05Z"}});
        normalize_micro_time(&mut w, "/spec/acquireTime");
        assert_eq!(
            w.pointer("/spec/acquireTime").and_then(Value::as_str),
            Some("2026-01-02T03:04:05.000000Z")
        );
    }

    #[test]
    fn human_durations_match_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(200), "3m20s");
        assert_eq!(human_duration(3600 * 5), "5h");
        assert_eq!(human_duration(86400 * 3), "3d");
    }
}
