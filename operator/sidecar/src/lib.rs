//! bloodraven-sidecar: runs beside mysqld and is Bloodraven's correctness layer.
//!
//! It makes mysqld writable only while it holds an authority record naming its own site and
//! an unexpired write lease from a majority of all sites' sidecars, renewed every
//! `duration / 3`; it applies the startup safety net and the topology-mismatch rule on its own
//! timers, with the operator down or not (docs/design/operator.md#authority-sidecars-and-fencing).
//! The rule itself is [`bloodraven_core::lease`]; this crate is its I/O shell.
//!
//! - [`config`]: flags and environment, validated into [`Settings`].
//! - [`discovery`]: peer discovery by DNS with the semantics of docs/design/requirements.md
//!   R004.13.
//! - [`server`]: the HTTP API on 8086 and the timers, [`Sidecar::start`]. Mutations and lease
//!   requests are signed ([`bloodraven_api::auth`], docs/design/history.md#issue-10-case-8; see
//!   [`RequestAuth`]).
//! - `watchdog`: SIGKILLs a mysqld that must be read-only, has no lease and cannot be
//!   fenced (frozen), so a lapsed lease means "cannot write" (`bloodraven_core::lease::watchdog`).
//! - `deadline`: arms mysqld's write deadline, a dead man's switch inside mysqld that fences
//!   it when this sidecar is killed or hangs (`bloodraven_mysql::deadline`).
//! - `backup`: the backup, restore-in-place and re-seed jobs; `physical`: the restore from a
//!   backup's `mariadb-backup` copy (mysqld stopped through its restore gate, the data
//!   directory swapped under a journal that a restarted sidecar rolls back); `archive`: a
//!   returning primary's errant transactions and a dump kept before a rejoin discards them.
//! - `testing` (feature `testing`): an in-process DNS server for tests.

mod archive;
mod backup;
mod clock;
pub mod config;
mod databases;
mod deadline;
pub mod discovery;
mod enforcer;
mod error;
mod http;
mod metrics;
mod observation;
mod peers;
mod physical;
pub mod server;
mod state;
#[cfg(feature = "testing")]
pub mod testing;
mod watchdog;

pub use config::{BackupSettings, Config, RequestAuth, Settings};
pub use error::{Error, Result};
pub use server::{RunningSidecar, Sidecar};
