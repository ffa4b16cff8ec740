//! The pod runtime, localkube's node side (crate `localkube-runtime`; `localkube-node` before
//! issue 37): pods as real processes in their own namespaces, cluster DNS, Service proxy, faults.

pub mod catalog;
pub mod cgroups;
pub mod clock;
pub mod cri_logs;
pub mod dns;
pub mod error;
pub mod exec;
pub mod faults;
pub mod ip;
pub mod lifecycle;
pub mod mariadb;
pub mod naming;
pub mod network;
pub mod node_agent;
pub mod partition;
pub mod probe;
pub mod proxy;
pub mod runtime;
pub mod service_wiring;
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
