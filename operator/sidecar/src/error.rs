//! The crate's error type.

use std::net::SocketAddr;

/// Everything the sidecar can fail at. Messages are lowercase fragments that read after
/// "failed to".
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A flag or environment variable is invalid.
    #[error("read configuration: {0}")]
    Config(String),
    /// The lease configuration is invalid.
    #[error(transparent)]
    LeaseConfig(#[from] bloodraven_core::lease::LeaseConfigError),
    /// Reading a credentials file failed.
    #[error("read {path}: {source}")]
    ReadFile {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A request-signature key file does not hold a valid key.
    #[error("load {path}: {source}")]
    Key {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: bloodraven_api::Error,
    },
    /// Binding the HTTP listener failed.
    #[error("listen on {address}: {source}")]
    Listen {
        /// The address.
        address: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Serving HTTP failed.
    #[error("serve http: {0}")]
    Serve(#[source] std::io::Error),
    /// Building the DNS resolver failed.
    #[error("build dns resolver: {0}")]
    Resolver(String),
    /// A DNS query failed.
    #[error("resolve {name}: {reason}")]
    Resolve {
        /// The name queried.
        name: String,
        /// Why.
        reason: String,
    },
    /// A site's discovery view resolved no address at all (docs/design/requirements.md R004.2:
    /// an error to retry).
    #[error("discover site {site}: {name} resolved no address")]
    EmptyView {
        /// The site.
        site: String,
        /// The name queried.
        name: String,
    },
    /// Building the HTTP client failed or a peer request failed.
    #[error("call peer sidecar {site} at {address}: {reason}")]
    Peer {
        /// The peer's site.
        site: String,
        /// The address tried.
        address: String,
        /// Why.
        reason: String,
    },
    /// Building the HTTP client failed.
    #[error("build http client: {0}")]
    HttpClient(String),
    /// A request names another group.
    #[error("accept request for group {requested:?}: this sidecar serves group {served:?}")]
    WrongGroup {
        /// The group in the request.
        requested: String,
        /// The group this sidecar serves.
        served: String,
    },
    /// A database name is invalid before any statement (`POST /v1/databases`).
    #[error("ensure database: {}", problem.describe())]
    InvalidDatabase {
        /// What is wrong with it.
        problem: bloodraven_api::sidecar::DatabaseNameProblem,
    },
    /// The server refused a database name.
    #[error("ensure database {database:?}: field database refused by the server: {reason}")]
    DatabaseNameRefused {
        /// The name.
        database: String,
        /// The server's error.
        reason: String,
    },
    /// A write was asked of a site that is not the writable active site.
    #[error("ensure database {database:?}: site {site} is not the writable active site ({reason}); a fenced site never takes a write")]
    NotWritable {
        /// The name.
        database: String,
        /// This sidecar's site.
        site: String,
        /// Why it is not writable (the write rule's reason, or what mysqld reads).
        reason: String,
    },
    /// Creating a database failed and it was not found afterwards.
    #[error("ensure database {database:?}: {reason}")]
    EnsureDatabase {
        /// The name.
        database: String,
        /// The error, and what the re-read found.
        reason: String,
    },
    /// A mysqld operation failed.
    #[error(transparent)]
    Mysql(#[from] bloodraven_mysql::live::LiveError),
    /// Parsing a GTID set or building a statement failed.
    #[error(transparent)]
    Statement(#[from] bloodraven_mysql::Error),
    /// Setting up logging failed.
    #[error("set up logging: {0}")]
    Logging(String),
}

/// Result of the sidecar.
pub type Result<T, E = Error> = std::result::Result<T, E>;
