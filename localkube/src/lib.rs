//! localkube: an embedded single-machine Kubernetes control plane whose pods are real
//! processes. See `../shared/design/localkube.md`.
//!
//! Module ownership while the crate is being built: `apiserver` (API server, store,
//! controllers, CLI) and `node` (node agent, pod namespaces, DNS, Service proxy, faults).

pub mod apiserver;
pub mod kubelet;
pub mod node;
