//! Values printed the way kube-apiserver 1.32 (Go's `fmt`) prints them in field errors:
//! `%q` strings, `%v` numbers (`1e+06`, `2.5`), `%#v` maps and slices
//! (`map[string]interface {}{"name":"iad"}`), as `field.Error.ErrorBody` does with the
//! values JSON decodes to (string, int64, float64, bool, map, slice, nil).

use serde_json::Value;
use std::fmt::Write;

/// `strconv.Quote`: double-quoted, with Go's escapes.
pub fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() || (c != ' ' && c.is_whitespace()) => {
                if (c as u32) <= 0xffff {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                } else {
                    let _ = write!(out, "\\U{:08x}", c as u32);
                }
            }
            character => out.push(character),
        }
    }
    out.push('"');
    out
}

/// A float64 as Go's `%v` prints it: the shortest representation, in exponent form
/// (`1e+06`, `1.5e-05`) when the exponent is below -4 or at least 6... as `strconv`'s
/// `'g'` format with the shortest precision decides.
pub fn float(number: f64) -> String {
    if number.is_nan() {
        return "NaN".into();
    }
    if number.is_infinite() {
        return if number > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if number == 0.0 {
        return if number.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    // Rust's `{:e}` is the shortest round-trip form too: `1.234567e6`, `-1.5e-5`.
    let sci = format!("{number:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        format!("{number}")
    }
}

/// A JSON number as the Go value it decodes to prints with `%v`: int64 as an integer,
/// anything else as a float64.
pub fn number(n: &serde_json::Number) -> String {
    match n.as_i64() {
        Some(index) => index.to_string(),
        None => float(n.as_f64().unwrap_or(0.0)),
    }
}

/// The value part of `field.Error.ErrorBody` for a decoded JSON value: `%v` for numbers and
/// booleans, `%q` for strings (`nil` prints as `"null"`), `%#v` for maps and slices.
pub fn bad_value(value: &Value) -> String {
    match value {
        Value::Null => quote("null"),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(n) => number(n),
        Value::String(text) => quote(text),
        Value::Array(_) | Value::Object(_) => sharp_v(value),
    }
}

/// Go's `%#v` of a decoded JSON value (`map[string]interface {}{"a":1}`,
/// `[]interface {}{"x"}`), map keys sorted as `fmt` sorts them.
pub fn sharp_v(value: &Value) -> String {
    let mut out = String::new();
    write_sharp_v(value, &mut out);
    out
}

fn write_sharp_v(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("interface {}(nil)"),
        Value::Bool(flag) => out.push_str(if *flag { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number(n)),
        Value::String(text) => out.push_str(&quote(text)),
        Value::Array(items) => {
            out.push_str("[]interface {}{");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_sharp_v(item, out);
            }
            out.push('}');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push_str("map[string]interface {}{");
            for (index, key) in keys.into_iter().enumerate() {
                if index > 0 {
                    out.push_str(", ");
                }
                out.push_str(&quote(key));
                out.push(':');
                write_sharp_v(&map[key], out);
            }
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_print_as_go_prints_them() {
        for (number, want) in [
            (1.0, "1"),
            (0.0, "0"),
            (2.5, "2.5"),
            (100000.0, "100000"),
            (1e6, "1e+06"),
            (1234567.0, "1.234567e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-1.5e-7, "-1.5e-07"),
            (1e21, "1e+21"),
        ] {
            assert_eq!(float(number), want, "{number}");
        }
    }

    #[test]
    fn values_print_as_field_errors_print_them() {
        assert_eq!(bad_value(&json!("fast")), "\"fast\"");
        assert_eq!(bad_value(&json!("a\"b\n")), "\"a\\\"b\\n\"");
        assert_eq!(bad_value(&json!(3)), "3");
        assert_eq!(bad_value(&json!(2.5)), "2.5");
        assert_eq!(bad_value(&json!(null)), "\"null\"");
        assert_eq!(
            bad_value(&json!({"name": "iad", "a": [1, true]})),
            "map[string]interface {}{\"a\":[]interface {}{1, true}, \"name\":\"iad\"}"
        );
    }
}
