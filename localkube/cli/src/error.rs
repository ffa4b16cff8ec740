//! The one error type of the `localkube` command line.

/// Result of the command line.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Failures of the `localkube` command line; each reads after "failed to".
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server failed to start, serve or stop, or its state dir is unusable.
    #[error(transparent)]
    ApiServer(#[from] localkube_apiserver::Error),
    /// The kubelet could not be prepared or reached.
    #[error(transparent)]
    Kubelet(#[from] localkube_kubelet::Error),
    /// The command line or the state dir is unusable.
    #[error("{0}")]
    Config(String),
}

impl Error {
    /// A file, process or signal handler of the state dir could not be used (reported as
    /// the API server reports its own state dir's I/O).
    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        Error::ApiServer(localkube_apiserver::Error::io(path, source))
    }
}
