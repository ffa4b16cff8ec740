//! Expectation targets: one module per target, each validating, observing, evaluating and
//! describing it ([`target::ExpectTarget`]); [`target::Target`] is the single-key enum an
//! `expect` step names one of.

pub mod archive;
pub mod connection;
pub mod counter;
pub mod deploy_api;
pub mod dns;
pub mod dns_endpoint;
pub mod endpoints;
pub mod event;
pub mod group;
pub mod metric;
pub mod mysql;
pub mod node;
pub mod object;
pub mod pods;
pub mod target;

pub use target::{ExpectTarget, Judging, Observation, Substitution, Target, Validation};
