//! The kubelet: connects the API server ([`localkube_apiserver`]) to the node side
//! ([`localkube_runtime`]): pods bound to a node run as processes, their status goes back to the
//! API, Services and DNSEndpoints feed the cluster DNS and proxy, `pods/exec`,
//! `pods/portforward` and `pods/attach` are served over websockets, and faults are injected
//! through a control socket.

pub mod control;
pub mod error;
pub mod kubelet_process;
pub mod log_copy;
pub mod plugin;
pub mod portforward;
pub mod service_specs;
pub mod spdy_dictionary;
pub mod status;
pub mod stream;
pub mod translate;

pub use error::{Error, Result};
pub use plugin::{lookup, prepare, Kubelet, KubeletConfig, Shared};
