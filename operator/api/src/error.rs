//! The crate's error type.

/// Errors from parsing the wire forms of this crate's types.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    /// A duration string that is not a Go duration (`2s`, `5m`, `1h30m`, `500ms`).
    #[error("parse duration {input:?}: {reason}")]
    Duration {
        /// The text that was given.
        input: String,
        /// What was wrong with it.
        reason: String,
    },
    /// A timestamp that is not RFC 3339.
    #[error("parse timestamp {input:?}: {reason}")]
    Timestamp {
        /// The text that was given.
        input: String,
        /// What was wrong with it.
        reason: String,
    },
    /// A key of the sidecar API's request signatures that does not parse (feature `auth`).
    #[error("read {what}: {reason}")]
    Key {
        /// Which key.
        what: String,
        /// What was wrong with it.
        reason: String,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
