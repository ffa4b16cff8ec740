//! The history of a scenario (Jepsen's model): events, storage, recording.

pub mod event;
pub mod recorder;
pub mod store;
