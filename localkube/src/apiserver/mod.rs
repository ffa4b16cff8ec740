//! The Kubernetes-compatible API server: store, verbs, watch, patch, apply, RBAC, controllers.
//!
//! Entry points: [`LocalKube::start`] (embedded), the `localkube` binary ([`cli`]), and
//! [`log_path`], where the node agent writes container logs for `pods/log`.

pub mod apply;
pub mod auth;
pub mod cli;
pub mod controllers;
pub mod defaults;
pub mod discovery;
pub mod error;
pub mod fields;
pub mod http;
pub mod kubelet;
pub mod logs;
pub mod meta;
pub mod ops;
pub mod patch;
pub mod protobuf;
pub mod registry;
pub mod reviews;
pub mod schema;
pub mod selector;
pub mod server;
pub mod store;
pub mod table;
pub mod tls;
pub mod validation;

pub use error::{ApiError, Error, Result};
pub use logs::log_path;
pub use ops::Cluster;
pub use server::{CleanupHook, ClientConfig, Config, LocalKube, Plugin, PluginContext};
