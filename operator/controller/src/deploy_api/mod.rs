//! The deploy lease API `/deploy/v1` (docs/design/requirements.md R003), served on the TLS
//! listener by the leader.

pub mod backend;
pub mod handlers;
pub mod review;
pub mod store;

#[cfg(test)]
mod handler_tests;
