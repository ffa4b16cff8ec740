//! bloodraven-core: the decision logic. Observations in, actions out.
//!
//! Pure and deterministic: no clock reads, no I/O, no randomness. Time is an input
//! ([`time::Timestamp`]); the operator shell and the simulator execute the same actions.

pub mod deploy;
pub mod engine;
pub mod lease;
pub mod time;

pub use engine::{
    decide, decide_with_options, Action, DecideOptions, Decision, GroupMemory, Observation,
};
