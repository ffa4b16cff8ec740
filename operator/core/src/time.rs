//! Time as an input: the wall-clock [`Timestamp`] every decision takes as `now`.
//!
//! Core never reads a clock; the operator shell reads one and the simulator invents one.

pub use bloodraven_api::Timestamp;
pub use std::time::Duration;
