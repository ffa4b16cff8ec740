//! Errors of the deploy-lease module: decoding stored state. Request refusals are not errors;
//! they are [`super::outcome::Refusal`] values.

use super::model::LeaseKind;

/// What can go wrong turning stored Lease annotations and tombstone ConfigMap data back into
/// state. Messages read after "failed to" and name the bad field.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    /// A required annotation or data field is absent.
    #[error("decode deploy lease state: {field} is missing")]
    MissingField {
        /// The annotation key or `data[<key>].<field>` path.
        field: String,
    },
    /// A field is present but unusable.
    #[error("decode deploy lease state: {field} = {value:?} {reason}")]
    InvalidField {
        /// The annotation key or `data[<key>].<field>` path.
        field: String,
        /// The stored text.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Two stored leases claim the same kind in one group.
    #[error("load deploy leases: two {kind} leases, held by {first:?} and {second:?}")]
    DuplicateLease {
        /// The contested kind.
        kind: LeaseKind,
        /// The operation of the first lease loaded.
        first: String,
        /// The operation of the second.
        second: String,
    },
}

/// The deploy module's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
