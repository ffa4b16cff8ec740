//! Bloodraven's in-cluster fault agent (docs/design/harness.md, "One run", step 3; style
//! rule 14): a privileged DaemonSet that kills, freezes and partitions the containers of pods
//! on its node. It is driven only through the Kubernetes API (`kubectl exec <agent-pod> --
//! bloodraven-chaos-agent ctl '<json>'`, so RBAC on pods/exec decides who may drive it) and
//! opens no network port: `serve` listens on a unix socket in its state directory.

pub mod agent;
pub mod cgroup;
pub mod command;
pub mod ctl;
pub mod error;
pub mod faults;
pub mod pod;
pub mod procfs;
pub mod protocol;
pub mod server;
pub mod signals;

pub use error::{Error, Result};
