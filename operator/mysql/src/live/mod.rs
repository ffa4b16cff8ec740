//! The live MySQL client (feature `live`): mysql_async over the statements of [`crate::Dialect`].
//!
//! Every mutation re-reads the server afterwards and reports what it found
//! (docs/design/requirements.md R001.15: an error or a timeout from a mutation is an unknown,
//! never "did not happen"): see [`MutationOutcome`].

mod client;
mod deadline;
pub use deadline::Armed;
mod error;
mod mutate;
mod observe;
mod row;
pub mod sandbox;

pub use client::{ConnectOptions, LiveMysql};
pub use error::{LiveError, LiveResult};
pub use mutate::{MutationOutcome, Observed, ReceivedDrain};
pub use observe::{ReadOnlyState, ServerRun, Snapshot};
