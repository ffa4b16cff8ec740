//! The deploy-lease API (`/deploy/v1`, docs/design/requirements.md R003) as a pure state machine.
//!
//! A deployment pipeline gets exactly two things per group: the `migration` mutex and a
//! renewable `failover-hold` that defers planned disruption (planned failover, ordered update,
//! restore-in-place) and nothing else. Emergency failover, returning-primary fencing and
//! primary reassertion never read a lease ([`DisruptionKind::consults_deployment_hold`]).
//! `status.topologyGeneration` is the fence: every change revokes every lease
//! ([`DeployLeases::revoke_all`]), and tombstones keep a revoked operation out for good.
//!
//! Core decides; the shell authenticates (TokenReview, audience `bloodraven-deploy`), generates
//! tokens, reads the clock, stores [`codec`] forms in Lease objects and a ConfigMap, answers
//! `503 {"error":"not_leader"}` on followers ([`Refusal::NotLeader`]) and logs
//! `msg="deploy api"`.

mod auth;
pub mod codec;
mod disruption;
mod error;
mod model;
mod outcome;
mod state;

#[cfg(test)]
mod properties;

pub use auth::{authorized_clients, is_known_client, may_coordinate, AuthorizedClient, Caller};
pub use disruption::{DisruptionKind, HoldInfo};
pub use error::{Error, Result};
pub use model::{
    check_instance, check_operation_id, clamp_ttl, LeaseCredentials, LeaseKind, LeaseRecord,
    LeaseRequest, LeaseToken, RevokeReason, TokenHash, Tombstone, UnknownLeaseKind,
    INSTANCE_LENGTH_MAX, OPERATION_ID_LENGTH_MAX, TTL_SECONDS_MAX, TTL_SECONDS_MIN,
};
pub use outcome::{
    AcquireOutcome, ForbiddenReason, Grant, LeaseBody, LeaseSummary, Refusal, ReleaseOutcome,
    RenewOutcome, Renewal, ResponseBody, STATUS_BAD_REQUEST, STATUS_CONFLICT, STATUS_CREATED,
    STATUS_FORBIDDEN, STATUS_LOCKED, STATUS_NOT_FOUND, STATUS_NO_CONTENT, STATUS_OK,
    STATUS_SERVICE_UNAVAILABLE,
};
pub use state::{DeployLeases, Handled, RequestContext, Stability};
