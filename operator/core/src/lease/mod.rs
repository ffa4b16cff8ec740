//! The sidecar write-lease rule as a pure state machine, shared by the real sidecar and the
//! simulator (docs/design/operator.md#authority-sidecars-and-fencing).
//!
//! Time is an input: every function takes `now` as a [`MonotonicMillis`] read from the
//! sidecar's own monotonic clock (the real sidecar reads `tokio::time::Instant`, the simulator
//! invents one). Nothing here performs I/O.
//!
//! - [`peer`]: the granting side, [`should_grant`] and the grant bookkeeping [`GrantBook`].
//! - [`requester`]: the requesting side, lease rounds counted against a majority of all sites.
//! - [`rule`]: [`desired_read_only`], combining authority, lease, explicit fence, the startup
//!   safety net and the topology-mismatch rule, and [`enforcement`] against observed mysqld.
//! - [`site`]: [`SiteLease`], one sidecar's whole lease state wired together.
//! - [`watchdog`]: [`Watchdog`], when a mysqld that cannot be fenced is killed instead.

mod clock;
mod config;
pub mod peer;
pub mod requester;
pub mod rule;
pub mod site;
pub mod watchdog;

pub use clock::MonotonicMillis;
pub use config::{LeaseConfig, LeaseConfigError};
pub use peer::{should_grant, GrantBook};
pub use requester::{LeaseRound, Requester, RoundId};
pub use rule::{
    desired_read_only, enforcement, Enforcement, ReadOnlyReason, RuleInput, WriteDecision,
};
pub use site::SiteLease;
pub use watchdog::{fence_lead_ms, unfence_bound_ms, unfence_margin_ms, Watchdog, WatchdogVerdict};
