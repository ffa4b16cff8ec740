//! The libtest-mimic runner: flags, trials, step execution and expectation evaluation.

pub mod cli;
pub mod evaluate;
pub mod execute;
pub mod trials;
