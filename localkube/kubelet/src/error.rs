//! Errors of the kubelet.

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The pod spec references something that does not exist or is malformed
    /// (kubelet's `CreateContainerConfigError`).
    #[error("resolve the container config: {0}")]
    Config(String),
    /// The node side failed.
    #[error("{0}")]
    Node(#[from] localkube_runtime::Error),
    /// The API side failed.
    #[error("{0}")]
    Api(String),
    /// A file or socket operation failed.
    #[error("{action}: {source}")]
    Io {
        /// What was being done.
        action: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A control request was malformed.
    #[error("parse the control request: {0}")]
    Control(String),
}

impl Error {
    /// An I/O error while doing `action`.
    pub fn io(action: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let action = action.into();
        move |source| Error::Io { action, source }
    }
}

impl From<localkube_apiserver::ApiError> for Error {
    fn from(e: localkube_apiserver::ApiError) -> Self {
        Error::Api(e.message.clone())
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
