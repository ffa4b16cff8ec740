//! localkube's node side: pods as real processes in their own namespaces, cluster DNS,
//! Service proxy, faults. It knows nothing of the API server: the `localkube-kubelet` crate
//! turns API objects into [`PodSpec`]s and the node's state back into pod status.
//!
//! The executables that use it (`localkube-pod-exec`: [`exec::helper_main`];
//! `localkube-mariadb-entrypoint`: [`mariadb::entrypoint_main`]) are built by the
//! `localkube` crate, with the tests that run pods.

pub mod catalog;
pub mod clock;
pub mod dns;
pub mod error;
pub mod exec;
pub mod faults;
pub mod ip;
pub mod logs;
pub mod mariadb;
pub mod naming;
pub mod network;
pub mod node_agent;
pub mod partition;
pub mod probe;
pub mod proxy;
pub mod runtime;
pub mod services;
pub mod spec;
pub mod state;
pub mod volumes;

pub use catalog::ImageCatalog;
pub use clock::{ClockFaults, ClockOffset};
pub use error::{Error, Result};
pub use naming::{ClusterNaming, Ipv4Cidr};
pub use network::{ClusterNetwork, SandboxNet};
pub use node_agent::NodeAgent;
pub use partition::{Partition, Partitions};
pub use runtime::{default_bin_dir, Attached, ExecOutput, PodRuntime, RuntimeConfig};
pub use spec::*;
pub use state::{cleanup, StateFile};
