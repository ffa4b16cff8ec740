//! bloodraven-api: the Kubernetes-facing types of Bloodraven and every name it uses.
//!
//! - [`MysqlFailoverGroup`] and [`MysqlDatabase`]: the CRDs (`bloodraven.shipstream.io/v1`).
//! - [`DNSEndpoint`]: external-dns's `externaldns.k8s.io/v1alpha1` record object.
//! - [`names`]: labels, annotations, ports and object names (docs/design/architecture.md#names).
//! - [`sidecar`]: the wire types of the sidecar HTTP API.
//! - `auth` (feature `auth`): request signatures of the sidecar API
//!   (docs/design/history.md#issue-10-case-8).
//! - [`Timestamp`] and [`GoDuration`]: the time types the CRDs serialise.
//!
//! No I/O lives here.

mod duration;
mod error;
mod time;

#[cfg(feature = "auth")]
pub mod auth;
pub mod crds;
pub mod database;
pub mod dns;
pub mod group;
pub mod names;
pub mod rejoin;
pub mod restore;
pub mod sidecar;

pub use database::{DeploymentClient, FailoverGroupRef, MysqlDatabase, MysqlDatabaseSpec};
pub use dns::{DNSEndpoint, DNSEndpointSpec, Endpoint};
pub use duration::GoDuration;
pub use error::{Error, Result};
pub use group::*;
pub use rejoin::{RejoinPhase, RejoinStatus};
pub use restore::{
    BackupPhase, BackupStatus, DiscardedSinceFailover, RestoreMethod, RestorePhase, RestoreSource,
    RestoreStatus,
};
pub use time::Timestamp;
