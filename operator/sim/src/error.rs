//! The simulator's error type.

/// Result with the simulator's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong outside a simulated world (inside it, faults are the point, not errors).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A `--seeds` range did not parse.
    #[error("parse seed range {input:?}: expected START..END with START < END")]
    SeedRange {
        /// The text given.
        input: String,
    },
    /// A worker thread of the seed sweep panicked.
    #[error("run seed worker thread: it panicked")]
    WorkerPanicked,
}
