//! GTIDs and GTID sets for both flavors.
//!
//! See [`GtidSet`] for the semantics (in particular MariaDB's per-domain linear histories and
//! the text form of sets that are not a prefix).

mod divergence;
mod intervals;
mod set;
mod text;
mod transaction;

pub use divergence::{errant_transactions, lost_transactions, lost_transactions_across_rewind};
pub use set::GtidSet;
pub use transaction::Gtid;
pub(crate) use transaction::Source;
