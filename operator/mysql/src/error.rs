//! The crate's error type.

use crate::Flavor;

/// Everything that can go wrong in this crate. Messages are lowercase fragments that read
/// after "failed to".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A GTID or GTID set text did not parse.
    #[error("parse {flavor} GTID set at byte {position}: {reason} (in {text:?})")]
    GtidParse {
        /// The flavor whose syntax was expected.
        flavor: Flavor,
        /// Byte offset into the input where the problem starts.
        position: usize,
        /// What was wrong.
        reason: String,
        /// The offending item (at most 80 characters of it).
        text: String,
    },
    /// An operation combined GTID sets of two flavors.
    #[error("combine GTID sets of different flavors ({left} and {right})")]
    FlavorMismatch {
        /// The flavor of the left operand.
        left: Flavor,
        /// The flavor of the right operand.
        right: Flavor,
    },
    /// A flavor name was not `mariadb` or `mysql`.
    #[error("parse flavor {0:?}: expected \"mariadb\" or \"mysql\"")]
    UnknownFlavor(String),
    /// A MySQL server UUID was malformed.
    #[error("parse server UUID {0:?}: expected 32 hex digits in 8-4-4-4-12 groups")]
    InvalidUuid(String),
    /// A MySQL GTID tag was malformed.
    #[error("parse GTID tag {0:?}: expected a letter or underscore, then up to 31 letters, digits or underscores")]
    InvalidTag(String),
    /// A GTID sequence number was 0 (sequence numbers start at 1).
    #[error("build GTID: sequence number 0 is not a transaction")]
    ZeroSequence,
    /// A replication status row lacked a required column or had a bad value.
    #[error("parse replication status column {column}: {reason}")]
    StatusColumn {
        /// The column name as the flavor spells it.
        column: String,
        /// What was wrong.
        reason: String,
    },
    /// `SHOW ... STATUS` returned several replication channels and none is the default one
    /// (Bloodraven uses only the default, unnamed channel).
    #[error("pick the replication channel: no default channel among {0:?}")]
    NoDefaultChannel(Vec<String>),
    /// A value cannot be used in a statement (for example a NUL byte in a password or an
    /// empty user name).
    #[error("build statement: {0}")]
    InvalidStatementInput(String),
}

/// This crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
