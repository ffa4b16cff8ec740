//! Scenario files: the model, durations, partial matching, validation and the JSON Schema.

pub mod matcher;
pub mod model;
pub mod schema;
pub mod single_key;
pub mod span;
pub mod timing;
pub mod validate;
