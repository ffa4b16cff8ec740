//! `bloodraven-mysql`: the MySQL knowledge of Bloodraven, without I/O.
//!
//! - [`Flavor`]: MariaDB (the default, 10.11) or MySQL 8.4.
//! - [`Gtid`] and [`GtidSet`]: GTID set algebra for both flavors, with
//!   [`errant_transactions`] and [`lost_transactions`].
//! - [`ReplicationStatus`]: one typed replication status parsed from a `SHOW ... STATUS` row.
//! - [`Dialect`]: the statements for fencing, unfencing, promotion, repointing, draining and
//!   reading state, one implementation per flavor.
//! - [`deadline`]: the write deadline, a dead man's switch inside mysqld that fences it when
//!   the sidecar stops arming it.
//! - [`grants`]: the application user's GRANT statement and the read_only bypass check.
//! - [`canonical_host`]: the host-name rule behind "the reported source host canonically
//!   matches the active site's internal per-site Service" (docs/design/requirements.md R000.7).
//!
//! The optional `live` feature adds the `live` module (a mysql_async client); the default
//! build has no tokio and no mysql_async.

mod dialect;
mod error;
mod flavor;
mod gtid;
mod host;
mod sql;
mod status;

pub mod deadline;
pub mod grants;

#[cfg(feature = "live")]
pub mod live;

pub use dialect::{Dialect, MariaDbDialect, MySqlDialect, ReplicationSource, WaitOutcome};
pub use error::{Error, Result};
pub use flavor::Flavor;
pub use gtid::{
    errant_transactions, lost_transactions, lost_transactions_across_rewind, Gtid, GtidSet,
};
pub use host::{canonical_host, canonical_host_in, same_host};
pub use sql::{quote_identifier, quote_string};
pub use status::{
    parse_replication_rows, IoThreadState, ReplicationError, ReplicationStatus, StatusRow,
    UsingGtid,
};
