//! Scenario files: the model, durations, partial matching and validation.

pub mod matcher;
pub mod model;
pub mod single_key;
pub mod span;
pub mod validate;
