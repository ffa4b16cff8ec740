//! Quoting of literals and identifiers in statements.

use crate::{Error, Result};

/// Quotes `value` as a single-quoted SQL string literal.
///
/// Quotes are doubled (`''`), backslashes doubled and NUL, newline, carriage return and
/// Control-Z written as backslash escapes. Under the default `sql_mode` this reads back as
/// exactly `value`; under `NO_BACKSLASH_ESCAPES` the backslash escapes read back as literal
/// text but the literal still cannot be closed early, so no input injects SQL in either mode.
/// The [`Dialect::session_setup`](crate::Dialect::session_setup) statement makes the session
/// use the default reading.
pub fn quote_string(value: &str) -> String {
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('\'');
    for c in value.chars() {
        match c {
            '\'' => quoted.push_str("''"),
            '\\' => quoted.push_str("\\\\"),
            '\0' => quoted.push_str("\\0"),
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\u{1a}' => quoted.push_str("\\Z"),
            other => quoted.push(other),
        }
    }
    quoted.push('\'');
    quoted
}

/// Quotes `name` as a backquoted identifier (backquotes doubled). Fails on an empty name or
/// one containing NUL, which MySQL and MariaDB do not allow.
pub fn quote_identifier(name: &str) -> Result<String> {
    if name.is_empty() || name.contains('\0') {
        return Err(Error::InvalidStatementInput(format!(
            "identifier {name:?} is empty or contains NUL"
        )));
    }
    Ok(format!("`{}`", name.replace('`', "``")))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Brief: string literals must be escaped safely (quotes and backslashes).
    #[test]
    fn quote_string_escapes_quotes_backslashes_and_control_characters() {
        assert_eq!(quote_string("plain"), "'plain'");
        assert_eq!(quote_string("it's"), "'it''s'");
        assert_eq!(quote_string(r"back\slash"), r"'back\\slash'");
        assert_eq!(
            quote_string(r"\'; DROP TABLE t; --"),
            r"'\\''; DROP TABLE t; --'"
        );
        assert_eq!(quote_string("a\0b\nc\rd\u{1a}"), r"'a\0b\nc\rd\Z'");
        assert_eq!(quote_string(""), "''");
    }

    /// Reads a literal back the way MySQL does (default sql_mode, and with
    /// NO_BACKSLASH_ESCAPES); returns the value and the rest of the text after the closing
    /// quote.
    fn read_literal(text: &str, backslash_escapes: bool) -> Option<(String, &str)> {
        let body = text.strip_prefix('\'')?;
        let mut value = String::new();
        let mut chars = body.char_indices().peekable();
        while let Some((index, c)) = chars.next() {
            match c {
                '\\' if backslash_escapes => {
                    let (_, escaped) = chars.next()?;
                    value.push(match escaped {
                        '0' => '\0',
                        'n' => '\n',
                        'r' => '\r',
                        'Z' => '\u{1a}',
                        other => other,
                    });
                }
                '\'' if chars.peek().map(|&(_, next)| next) == Some('\'') => {
                    chars.next();
                    value.push('\'');
                }
                '\'' => return Some((value, &body[index + 1..])),
                other => value.push(other),
            }
        }
        None
    }

    proptest::proptest! {
        // Brief: no input closes the literal early, in either sql_mode; with the default
        // mode it reads back exactly.
        #[test]
        fn quoted_strings_read_back_and_never_close_early(value in ".*") {
            let quoted = quote_string(&value);
            let (read, rest) = read_literal(&quoted, true).expect("literal is closed");
            proptest::prop_assert_eq!(read, value);
            proptest::prop_assert_eq!(rest, "");
            let (_, rest) = read_literal(&quoted, false).expect("literal is closed");
            proptest::prop_assert_eq!(rest, "");
        }
    }

    #[test]
    fn quote_identifier_doubles_backquotes_and_rejects_empty() {
        assert_eq!(quote_identifier("app"), Ok("`app`".to_string()));
        assert_eq!(quote_identifier("we`ird"), Ok("`we``ird`".to_string()));
        assert!(quote_identifier("").is_err());
        assert!(quote_identifier("a\0b").is_err());
    }
}
