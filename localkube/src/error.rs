//! Errors of the `localkube` command line.

/// Result of the command line.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Failures of `localkube up|down|status|fault`. Messages are lowercase fragments that read
/// after "failed to".
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server failed.
    #[error("{0}")]
    ApiServer(#[from] localkube_apiserver::Error),
    /// The kubelet failed (setting up, or reaching the fault socket).
    #[error("{0}")]
    Kubelet(#[from] localkube_kubelet::Error),
    /// A file, process or signal handler could not be set up.
    #[error("access {path}: {source}")]
    Io {
        /// The path or thing that failed.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The command line or the state dir is unusable, or the cleanup failed.
    #[error("{0}")]
    Config(String),
}

impl Error {
    /// Wraps an I/O error with the path it concerned.
    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.as_ref().display().to_string(),
            source,
        }
    }
}
