//! localkube: an embedded single-machine Kubernetes control plane whose pods are real
//! processes. See `docs/design/localkube.md`.
//!
//! The crates, along the seams of the system:
//! - [`apiserver`] (`localkube-apiserver`): the API server, store, verbs, controllers, auth;
//! - [`runtime`] (`localkube-runtime`): pods as processes in their own namespaces, cluster
//!   DNS, Service proxy, faults;
//! - [`kubelet`] (`localkube-kubelet`): the agent binding the two;
//! - this crate: the `localkube` command line ([`cli`]), the helper binaries
//!   `localkube-pod-exec` and `localkube-mariadb-entrypoint`, and the three crates under
//!   their old paths (`localkube::apiserver::LocalKube`, ...) for the harness and the
//!   operator's tests.

pub mod cli;
pub mod error;

pub use error::{Error, Result};

pub use localkube_apiserver as apiserver;
pub use localkube_kubelet as kubelet;
pub use localkube_runtime as runtime;
