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
    /// The command line or the state dir is unusable, or the cleanup failed.
    #[error("{0}")]
    Config(String),
}

impl Error {
    /// Wraps an I/O error with the path (or thing: a signal handler, a process) it
    /// concerned, as the API server's [`localkube_apiserver::Error::Io`].
    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        Error::ApiServer(localkube_apiserver::Error::io(path, source))
    }
}
