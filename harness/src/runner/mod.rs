//! The libtest-mimic runner: flags, trials, step execution, expectation evaluation and the
//! judgement of a run.

pub mod cli;
pub mod evaluate;
pub mod execute;
pub mod judge;
pub mod trials;
