//! bloodraven-operator: the kube-rs shell around `bloodraven-core`.
//!
//! One poll per group (gather -> decide -> act, docs/design/style.md#1-gather-decide-act), its
//! object read on its own through [`decode`] (one that does not decode is reported and skipped;
//! a spec core finds invalid builds nothing): [`workloads`] first ensures the per-site
//! StatefulSets and the credentials Secret (a shell concern), [`gather`] reads the sidecars and
//! cluster objects into core's `Observation`, `bloodraven_core::decide` decides, [`act`]
//! executes the actions in order and persists memory ([`memory`]); a decision that starts a
//! planned failover passes the [`hold_gate`] first (no failover-hold granted since gather).
//! [`leader`] elects the one replica that polls, writes and serves; [`http`] serves :8082
//! (metrics, probes); [`deploy_api`] serves `/deploy/v1` over [`tls`] on :8443. [`install`]
//! renders the install manifests. [`logging`] formats the JSON log lines (`msg` at the top
//! level). The binary `bloodraven` only parses flags and calls [`run::run`].

pub mod act;
pub mod databases;
pub mod decode;
pub mod deploy_api;
mod error;
pub mod events;
pub mod gather;
pub mod hold_gate;
pub mod http;
pub mod install;
pub mod leader;
pub mod logging;
pub mod memory;
pub mod metrics;
pub mod poll;
pub mod render;
pub mod run;
pub mod sidecar;
#[cfg(test)]
mod test_support;
pub mod tls;
pub mod workloads;

pub use error::{Error, Result};
