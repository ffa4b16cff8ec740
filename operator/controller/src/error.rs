//! The crate's error type (docs/design/style.md#5-one-error-enum-per-crate): messages are
//! lowercase fragments that read after "failed to".

/// Everything the operator shell can fail at.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API call failed (an unknown for mutations: the next poll re-reads).
    #[error("{action}: {source}")]
    Kube {
        /// What was being done, e.g. `get mysqlfailovergroup bloodraven-playground/playground`.
        action: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A Kubernetes API call got no answer by its deadline (kube's client has no read
    /// timeout of its own); like any error of a mutation, an unknown.
    #[error("{action}: no answer within {timeout_ms} ms")]
    KubeTimeout {
        /// What was being done, e.g. `get lease bloodraven-leader`.
        action: String,
        /// How long the call was given.
        timeout_ms: u64,
    },
    /// An action was not issued: this replica no longer leads, or not for long enough
    /// (`LeaderFlag::may_act`).
    #[error("{action}: this replica is no longer the leader; not issued")]
    NotLeader {
        /// The action, e.g. `Fence`.
        action: String,
    },
    /// A sidecar call failed, timed out, answered non-2xx or undecodably.
    #[error("call sidecar of site {site} ({url}): {reason}")]
    Sidecar {
        /// The site.
        site: String,
        /// The URL called.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// A Secret of the group's request-signature keys holds no usable key.
    #[error("load the sidecar request-signature keys: {0}")]
    SigningKey(String),
    /// Loading the Kubernetes client configuration failed.
    #[error("load kubernetes client configuration: {0}")]
    ClientConfig(String),
    /// A file could not be read.
    #[error("read {path}: {source}")]
    ReadFile {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// TLS material was unusable.
    #[error("configure tls: {0}")]
    Tls(String),
    /// A listener could not be bound or served.
    #[error("serve {address}: {source}")]
    Serve {
        /// The listen address.
        address: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A value could not be turned into JSON.
    #[error("encode {what} as json: {source}")]
    Json {
        /// What was being encoded.
        what: String,
        /// The encoder error.
        #[source]
        source: serde_json::Error,
    },
    /// A stored custom resource does not decode (docs/design/operator.md#mysqlfailovergroup;
    /// [`crate::decode`]).
    #[error("{0}")]
    Undecodable(Box<crate::decode::Undecodable>),
    /// Stored deploy-lease state could not be decoded.
    #[error("{0}")]
    DeployState(#[from] bloodraven_core::deploy::Error),
    /// A TokenReview could not be made or was malformed.
    #[error("review token: {0}")]
    TokenReview(String),
    /// Install values are inconsistent (e.g. the deploy API without escrow TLS).
    #[error("render install manifests: {0}")]
    InstallValues(String),
    /// Rendering YAML failed.
    #[error("render yaml: {0}")]
    Yaml(#[from] serde_yaml::Error),
}

impl Error {
    /// Wraps a kube error with what was being done.
    pub fn kube(action: impl Into<String>, source: kube::Error) -> Self {
        Error::Kube {
            action: action.into(),
            source,
        }
    }

    /// Whether this is a Kubernetes 404 Not Found.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Kube { source: kube::Error::Api(status), .. } if status.code == 404)
    }

    /// Whether an action was not issued because leadership was lost.
    pub fn is_not_leader(&self) -> bool {
        matches!(self, Error::NotLeader { .. })
    }

    /// Whether this is a Kubernetes 409 Conflict (resourceVersion mismatch or AlreadyExists).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Kube { source: kube::Error::Api(status), .. } if status.code == 409)
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
