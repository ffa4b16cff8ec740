//! bloodraven-sim: a deterministic, seeded, replayable simulator over `bloodraven-core`.
//!
//! One seeded ChaCha PRNG drives a discrete-event world of three MySQL sites (GTID logs,
//! asynchronous replication, crashes, freezes, write deadlines), sidecars running core's real
//! lease rule and watchdog on drifting clocks (crashing and hanging), network partitions, a Kubernetes API store, an operator calling core's real `decide`
//! every pollInterval, a deploy pipeline holding the leases of docs/design/requirements.md
//! R003, planned failover requests, and (`--rejoin`) the archive and re-seed jobs that rejoin
//! a fenced returning primary. Invariants are checked after every event; each
//! violation is a finding class.
//!
//! A run is a pure function of (seed, commit): `--seed N --trace` replays it byte for byte.

#![doc = "Entry points: [`world::run`] for one seed, [`cli::sweep`] for a range."]

pub mod cli;
pub mod client;
pub mod clock;
pub mod config;
pub mod epochs;
pub mod error;
pub mod faults;
pub mod fencing;
pub mod gtid;
pub mod invariants;
pub mod kubelet;
pub mod network;
pub mod operator;
pub mod pipeline;
pub mod rejoin;
pub mod restore;
pub mod sidecar;
pub mod site;
pub mod store;
pub mod trace;
pub mod update;
pub mod world;

pub use config::SimConfig;
pub use error::{Error, Result};
pub use invariants::{Finding, FindingClass};
pub use world::{run, RunOutcome};
