//! The cluster backends of the harness (docs/design/harness.md#one-run); [`select`] chooses
//! and builds one.

pub mod config;
pub mod kind;
pub mod kind_cluster;
pub mod kubeconfig;
pub mod localkube;
pub mod select;
