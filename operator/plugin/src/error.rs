//! The plugin's one error enum; messages read after "failed to".

/// Errors of the plugin; messages read after "failed to".
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Loading the kubeconfig or building the client failed.
    #[error("load kubeconfig: {0}")]
    Config(String),
    /// A Kubernetes API call failed.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done.
        action: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The requested promotion cannot be asked for.
    #[error("request promotion: {0}")]
    InvalidTarget(String),
    /// The backup name cannot be used.
    #[error("request a backup or restore: {0}")]
    InvalidBackup(String),
    /// The requested rejoin cannot be asked for.
    #[error("request a rejoin: {0}")]
    InvalidRejoin(String),
}

/// The plugin's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
