//! The crate's error type.

/// Everything the counter app can fail at. Messages are lowercase fragments that read after
/// "failed to".
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A flag or environment variable is invalid.
    #[error("read configuration: {0}")]
    Config(String),
    /// Reading the password file failed.
    #[error("read {path}: {source}")]
    ReadFile {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The database host did not resolve.
    #[error("resolve {host}: {reason}")]
    Resolve {
        /// The host name.
        host: String,
        /// Why.
        reason: String,
    },
    /// A database operation failed.
    #[error(transparent)]
    Mysql(#[from] bloodraven_mysql::live::LiveError),
    /// Building a statement failed.
    #[error(transparent)]
    Statement(#[from] bloodraven_mysql::Error),
    /// A result had an unexpected shape.
    #[error("read {what}: {reason}")]
    Decode {
        /// What was read.
        what: String,
        /// Why.
        reason: String,
    },
    /// Binding or serving HTTP failed.
    #[error("serve http on {address}: {source}")]
    Serve {
        /// The address.
        address: std::net::SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Setting up logging failed.
    #[error("set up logging: {0}")]
    Logging(String),
}

impl Error {
    /// The MySQL server error code, if the server refused (1290: read-only).
    pub fn server_code(&self) -> Option<u16> {
        match self {
            Error::Mysql(error) => error.server_code(),
            Error::Config(_)
            | Error::ReadFile { .. }
            | Error::Resolve { .. }
            | Error::Statement(_)
            | Error::Decode { .. }
            | Error::Serve { .. }
            | Error::Logging(_) => None,
        }
    }
}

/// Result of the counter app.
pub type Result<T, E = Error> = std::result::Result<T, E>;
