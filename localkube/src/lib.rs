//! localkube: an embedded single-machine Kubernetes control plane whose pods are real
//! processes. See `shared/design/localkube.md`.
//!
//! This crate is the facade: the `localkube` command line ([`cli`]), its executables
//! (`localkube`, `localkube-pod-exec`, `localkube-mariadb-entrypoint`), and the three crates
//! it is made of, re-exported under the paths the harness and tests use:
//! - [`apiserver`] (`localkube-apiserver`): store, verbs, watch, apply, RBAC, controllers;
//!   no processes, namespaces or DNS. A user that needs only an API server depends on it
//!   alone.
//! - [`node`] (`localkube-node`): pods as processes in their own namespaces, cluster DNS,
//!   Service proxy, faults; no API server.
//! - [`kubelet`] (`localkube-kubelet`): the node agent plugin binding the two.

pub mod cli;
pub mod error;

pub use error::{Error, Result};
pub use localkube_apiserver as apiserver;
pub use localkube_kubelet as kubelet;
pub use localkube_node as node;
