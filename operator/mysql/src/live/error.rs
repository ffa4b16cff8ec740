//! Errors of the live client.
//!
//! A separate enum from [`crate::Error`]: that one is `Clone + Eq` and describes pure
//! parsing and statement building; these carry I/O failures. [`LiveError::Statement`] wraps it.

use std::time::Duration;

/// Everything the live client can fail at. Messages are lowercase fragments that read after
/// "failed to".
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// Opening a connection failed.
    #[error("connect to mysql at {address}: {source}")]
    Connect {
        /// `host:port`.
        address: String,
        /// The client's error.
        #[source]
        source: mysql_async::Error,
    },
    /// A connection or statement did not finish in time. The statement may still have been
    /// applied by the server.
    #[error("{what} within {timeout:?} (the server may still have applied it)")]
    Timeout {
        /// What was attempted.
        what: String,
        /// How long the client waited.
        timeout: Duration,
    },
    /// A statement returned an error.
    #[error("run {statement:?}: {source}")]
    Query {
        /// The statement (passwords are never part of it in logs: see [`LiveError::redacted`]).
        statement: String,
        /// The client's error.
        #[source]
        source: mysql_async::Error,
    },
    /// A result did not have the expected shape.
    #[error("read {what}: {reason}")]
    Decode {
        /// What was read.
        what: String,
        /// What was wrong with it.
        reason: String,
    },
    /// Setting up a sandbox server (tests) failed.
    #[error("{what}: {reason}")]
    Sandbox {
        /// What was attempted.
        what: String,
        /// Why it failed.
        reason: String,
    },
    /// Parsing or statement building failed.
    #[error(transparent)]
    Statement(#[from] crate::Error),
}

impl LiveError {
    /// Whether the connection was refused: nothing listens on mysqld's port, so mysqld is not
    /// running (docs/design/history.md#issue-10-case-1: only this, not any error, proves
    /// "down"). A timeout, a server error (access denied, ...) or a decode error proves nothing.
    pub fn refused(&self) -> bool {
        let LiveError::Connect { source, .. } = self else {
            return false;
        };
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(source);
        while let Some(error) = cause {
            if let Some(io) = error.downcast_ref::<std::io::Error>() {
                if io.kind() == std::io::ErrorKind::ConnectionRefused {
                    return true;
                }
            }
            cause = error.source();
        }
        false
    }

    /// The server error code, when the server refused a statement (1290 is `read_only`).
    pub fn server_code(&self) -> Option<u16> {
        match self {
            LiveError::Query {
                source: mysql_async::Error::Server(server),
                ..
            }
            | LiveError::Connect {
                source: mysql_async::Error::Server(server),
                ..
            } => Some(server.code),
            LiveError::Query { .. }
            | LiveError::Connect { .. }
            | LiveError::Timeout { .. }
            | LiveError::Decode { .. }
            | LiveError::Sandbox { .. }
            | LiveError::Statement(_) => None,
        }
    }

    /// Whether this is a timeout.
    pub fn is_timeout(&self) -> bool {
        matches!(self, LiveError::Timeout { .. })
    }

    /// Statement text with a `PASSWORD = '...'` clause blanked, for logs and errors.
    pub fn redacted(statement: &str) -> String {
        let upper = statement.to_ascii_uppercase();
        match upper.find("PASSWORD = '") {
            None => statement.to_owned(),
            Some(start) => {
                let value_start = start + "PASSWORD = '".len();
                let rest = &statement[value_start..];
                let mut end = None;
                let mut escaped = false;
                for (index, c) in rest.char_indices() {
                    match (escaped, c) {
                        (true, _) => escaped = false,
                        (false, '\\') => escaped = true,
                        (false, '\'') => {
                            end = Some(index);
                            break;
                        }
                        (false, _) => {}
                    }
                }
                match end {
                    Some(end) => format!("{}***{}", &statement[..value_start], &rest[end..]),
                    None => format!("{}***", &statement[..value_start]),
                }
            }
        }
    }
}

/// Result of the live client.
pub type LiveResult<T, E = LiveError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacted_hides_replication_password_in_errors() {
        let statement =
            "CHANGE MASTER TO MASTER_HOST = 'h', MASTER_PASSWORD = 's\\'ecret', MASTER_PORT = 1";
        assert_eq!(
            LiveError::redacted(statement),
            "CHANGE MASTER TO MASTER_HOST = 'h', MASTER_PASSWORD = '***', MASTER_PORT = 1"
        );
        assert_eq!(LiveError::redacted("STOP SLAVE"), "STOP SLAVE");
    }
}
