//! localkube's kubelet: connects the API server ([`localkube_apiserver`]) to the node side
//! ([`localkube_node`]) as a [`localkube_apiserver::Plugin`]: pods bound to a node run as
//! processes, their status goes back to the API, Services and DNSEndpoints feed the cluster
//! DNS and proxy, `pods/exec`, `pods/portforward` and `pods/attach` are served over
//! websockets ([`stream`], through `Plugin::serve_pod_stream`), and faults are injected
//! through a control socket. Its end-to-end tests run pods, so they are the `localkube`
//! crate's (`localkube/tests/it`).

pub mod agent;
pub mod control;
pub mod error;
pub mod log_copier;
pub mod portforward;
pub mod service_specs;
pub mod spdy_dictionary;
pub mod status;
pub mod stream;
pub mod translate;

pub use agent::{lookup, prepare, Kubelet, KubeletConfig, Shared};
pub use error::{Error, Result};
