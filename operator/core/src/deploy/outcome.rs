//! Outcomes of the deploy-lease operations and their HTTP form (docs/design/requirements.md
//! R003.10-R003.24): a status code and a serde body per outcome. The shell serialises
//! [`ResponseBody`] with `serde_json` and sends it.

use std::time::Duration;

use serde::Serialize;

use super::model::{LeaseKind, LeaseToken, RevokeReason};
use crate::time::Timestamp;

/// HTTP 200 OK.
pub const STATUS_OK: u16 = 200;
/// HTTP 201 Created.
pub const STATUS_CREATED: u16 = 201;
/// HTTP 204 No Content.
pub const STATUS_NO_CONTENT: u16 = 204;
/// HTTP 400 Bad Request.
pub const STATUS_BAD_REQUEST: u16 = 400;
/// HTTP 403 Forbidden.
pub const STATUS_FORBIDDEN: u16 = 403;
/// HTTP 404 Not Found.
pub const STATUS_NOT_FOUND: u16 = 404;
/// HTTP 409 Conflict.
pub const STATUS_CONFLICT: u16 = 409;
/// HTTP 423 Locked.
pub const STATUS_LOCKED: u16 = 423;
/// HTTP 503 Service Unavailable.
pub const STATUS_SERVICE_UNAVAILABLE: u16 = 503;

/// A lease handed out by a POST: the only place a token ever leaves the operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// Which lease.
    pub kind: LeaseKind,
    /// The holder operation.
    pub operation_id: String,
    /// The `MysqlDatabase` it was granted for.
    pub instance: String,
    /// The new token; any earlier token for this lease is now invalid.
    pub token: LeaseToken,
    /// The confirmed deadline.
    pub expires_at: Timestamp,
    /// The generation the lease is stamped with; the client compares it on every renewal.
    pub topology_generation: u64,
}

/// A successful renewal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Renewal {
    /// Which lease.
    pub kind: LeaseKind,
    /// The holder operation.
    pub operation_id: String,
    /// The `MysqlDatabase` it was granted for.
    pub instance: String,
    /// The new confirmed deadline.
    pub expires_at: Timestamp,
    /// The generation the lease is still stamped with.
    pub topology_generation: u64,
}

/// Why a 403 that is not a token mismatch was answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ForbiddenReason {
    /// The caller is not in `spec.deploymentClients` of the `MysqlDatabase` named by
    /// `instance` in this group.
    NotAuthorized,
    /// A failover-hold was asked for by someone other than the live migration holder with
    /// the same `operationId` and `instance` (docs/design/requirements.md R003.11: every other
    /// caller receives `403`).
    NotMigrationHolder,
}

/// Every refusal the API answers, with its status code and its exact `{"error": ...}` body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum Refusal {
    /// 400: the request names an invalid field (`{"error":"invalid_request","field","message"}`).
    InvalidRequest {
        /// The wire name of the bad field (`operationId`, `instance`).
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// 403: the caller may not do this (`{"error":"forbidden","reason"}`).
    Forbidden {
        /// Not a deployment client of the instance, or not the migration holder.
        reason: ForbiddenReason,
    },
    /// 403: wrong or stale token (`{"error":"token_mismatch"}`). The caller holds no authority.
    TokenMismatch,
    /// 404: no such lease, or it expired (`{"error":"not_found"}`).
    NotFound,
    /// 409: another operation holds this lease (`{"error":"held","kind","operationId",
    /// "instance","expiresAt"}`) - everything the caller needs to wait politely.
    #[serde(rename_all = "camelCase")]
    Held {
        /// The held lease kind.
        kind: LeaseKind,
        /// The holder operation.
        operation_id: String,
        /// The holder's `MysqlDatabase`.
        instance: String,
        /// The holder's current deadline.
        expires_at: Timestamp,
    },
    /// 409: the operation was revoked (`{"error":"revoked","operationId","reason",
    /// "topologyGeneration"}`); terminal for that operation.
    #[serde(rename_all = "camelCase")]
    Revoked {
        /// The revoked operation.
        operation_id: String,
        /// `TopologyChanged` or `OperatorRevoked`.
        reason: RevokeReason,
        /// The generation in force after the revocation.
        topology_generation: u64,
    },
    /// 423: the group is between confirmed states (`{"error":"unstable","retryAfterSeconds"}`).
    /// Not a renewal: the last confirmed deadline stands.
    #[serde(rename_all = "camelCase")]
    Unstable {
        /// When to try again, whole seconds, at least 1.
        retry_after_seconds: u64,
    },
    /// 503: this replica is not the leader (`{"error":"not_leader"}`); the shell answers it
    /// without consulting the state machine.
    NotLeader,
}

impl Refusal {
    /// 423 with `retry_after` rounded up to whole seconds, at least 1.
    pub fn unstable(retry_after: Duration) -> Self {
        let whole = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
        Refusal::Unstable {
            retry_after_seconds: whole.max(1),
        }
    }

    /// The HTTP status code.
    pub const fn status_code(&self) -> u16 {
        match self {
            Refusal::InvalidRequest { .. } => STATUS_BAD_REQUEST,
            Refusal::Forbidden { .. } | Refusal::TokenMismatch => STATUS_FORBIDDEN,
            Refusal::NotFound => STATUS_NOT_FOUND,
            Refusal::Held { .. } | Refusal::Revoked { .. } => STATUS_CONFLICT,
            Refusal::Unstable { .. } => STATUS_LOCKED,
            Refusal::NotLeader => STATUS_SERVICE_UNAVAILABLE,
        }
    }

    /// The `error` string of the body, for the `deploy api` log line.
    pub const fn error_code(&self) -> &'static str {
        match self {
            Refusal::InvalidRequest { .. } => "invalid_request",
            Refusal::Forbidden { .. } => "forbidden",
            Refusal::TokenMismatch => "token_mismatch",
            Refusal::NotFound => "not_found",
            Refusal::Held { .. } => "held",
            Refusal::Revoked { .. } => "revoked",
            Refusal::Unstable { .. } => "unstable",
            Refusal::NotLeader => "not_leader",
        }
    }
}

/// Answer to `POST .../leases`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AcquireOutcome {
    /// 201: a new lease.
    Granted(Grant),
    /// 200: the same operation repeated its POST; the token was rotated and the old one no
    /// longer works.
    Rotated(Grant),
    /// A refusal (400, 403, 409 held, 409 revoked, 423).
    Refused(Refusal),
}

/// Answer to `PUT` (renew).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RenewOutcome {
    /// 200: new deadline and generation.
    Renewed(Renewal),
    /// A refusal (400, 403, 403 token_mismatch, 404, 409 revoked, 423).
    Refused(Refusal),
}

/// Answer to `DELETE` (release).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReleaseOutcome {
    /// 204: the lease is gone.
    Released {
        /// Which lease.
        kind: LeaseKind,
        /// The operation that held it.
        operation_id: String,
        /// Its `MysqlDatabase`.
        instance: String,
    },
    /// A refusal (400, 403, 403 token_mismatch, 404, 409 revoked).
    Refused(Refusal),
}

/// A successful lease body: `{"kind","operationId","token","expiresAt","topologyGeneration"}`,
/// `token` only in POST responses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseBody<'a> {
    /// Which lease.
    pub kind: LeaseKind,
    /// The holder operation.
    pub operation_id: &'a str,
    /// The token, present only when a POST granted or rotated it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<&'a str>,
    /// The confirmed deadline, RFC 3339.
    pub expires_at: Timestamp,
    /// The generation the lease is stamped with.
    pub topology_generation: u64,
}

/// What the shell writes as the JSON body of a response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ResponseBody<'a> {
    /// 200/201 lease body.
    Lease(LeaseBody<'a>),
    /// `{"error": ...}` body.
    Refusal(&'a Refusal),
}

impl Grant {
    fn body(&self) -> LeaseBody<'_> {
        LeaseBody {
            kind: self.kind,
            operation_id: &self.operation_id,
            token: Some(self.token.expose()),
            expires_at: self.expires_at,
            topology_generation: self.topology_generation,
        }
    }
}

impl AcquireOutcome {
    /// The HTTP status code.
    pub const fn status_code(&self) -> u16 {
        match self {
            AcquireOutcome::Granted(_) => STATUS_CREATED,
            AcquireOutcome::Rotated(_) => STATUS_OK,
            AcquireOutcome::Refused(refusal) => refusal.status_code(),
        }
    }

    /// The JSON body.
    pub fn body(&self) -> ResponseBody<'_> {
        match self {
            AcquireOutcome::Granted(grant) | AcquireOutcome::Rotated(grant) => {
                ResponseBody::Lease(grant.body())
            }
            AcquireOutcome::Refused(refusal) => ResponseBody::Refusal(refusal),
        }
    }
}

impl RenewOutcome {
    /// The HTTP status code.
    pub const fn status_code(&self) -> u16 {
        match self {
            RenewOutcome::Renewed(_) => STATUS_OK,
            RenewOutcome::Refused(refusal) => refusal.status_code(),
        }
    }

    /// The JSON body (no token: renewals never reveal one).
    pub fn body(&self) -> ResponseBody<'_> {
        match self {
            RenewOutcome::Renewed(renewal) => ResponseBody::Lease(LeaseBody {
                kind: renewal.kind,
                operation_id: &renewal.operation_id,
                token: None,
                expires_at: renewal.expires_at,
                topology_generation: renewal.topology_generation,
            }),
            RenewOutcome::Refused(refusal) => ResponseBody::Refusal(refusal),
        }
    }
}

impl ReleaseOutcome {
    /// The HTTP status code.
    pub const fn status_code(&self) -> u16 {
        match self {
            ReleaseOutcome::Released { .. } => STATUS_NO_CONTENT,
            ReleaseOutcome::Refused(refusal) => refusal.status_code(),
        }
    }

    /// The JSON body; `None` for 204.
    pub fn body(&self) -> Option<ResponseBody<'_>> {
        match self {
            ReleaseOutcome::Released { .. } => None,
            ReleaseOutcome::Refused(refusal) => Some(ResponseBody::Refusal(refusal)),
        }
    }
}

/// One entry of `leases` in `GET /deploy/v1/groups/{group}` (never a token or its hash).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseSummary {
    /// Which lease.
    pub kind: LeaseKind,
    /// The holder operation.
    pub operation_id: String,
    /// The holder's `MysqlDatabase`.
    pub instance: String,
    /// The confirmed deadline.
    pub expires_at: Timestamp,
    /// The generation the lease is stamped with.
    pub topology_generation: u64,
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    fn json_of<T: Serialize>(value: &T) -> Value {
        serde_json::to_value(value).expect("response bodies serialise")
    }

    const EXPIRES: Timestamp = Timestamp::from_unix_millis(1_796_007_358_123);

    #[test]
    fn seed_003_error_bodies_use_the_exact_error_strings() {
        let held = Refusal::Held {
            kind: LeaseKind::Migration,
            operation_id: "a1".into(),
            instance: "counter-app".into(),
            expires_at: EXPIRES,
        };
        assert_eq!(held.status_code(), 409);
        assert_eq!(
            json_of(&held),
            json!({"error":"held","kind":"migration","operationId":"a1","instance":"counter-app","expiresAt":"2026-11-30T02:55:58.123Z"})
        );
        let revoked = Refusal::Revoked {
            operation_id: "a1".into(),
            reason: RevokeReason::TopologyChanged,
            topology_generation: 18,
        };
        assert_eq!(revoked.status_code(), 409);
        assert_eq!(
            json_of(&revoked),
            json!({"error":"revoked","operationId":"a1","reason":"TopologyChanged","topologyGeneration":18})
        );
        assert_eq!(Refusal::TokenMismatch.status_code(), 403);
        assert_eq!(
            json_of(&Refusal::TokenMismatch),
            json!({"error":"token_mismatch"})
        );
        assert_eq!(Refusal::NotFound.status_code(), 404);
        assert_eq!(json_of(&Refusal::NotFound), json!({"error":"not_found"}));
        let unstable = Refusal::unstable(Duration::from_secs(2));
        assert_eq!(unstable.status_code(), 423);
        assert_eq!(
            json_of(&unstable),
            json!({"error":"unstable","retryAfterSeconds":2})
        );
        assert_eq!(Refusal::NotLeader.status_code(), 503);
        assert_eq!(json_of(&Refusal::NotLeader), json!({"error":"not_leader"}));
        let forbidden = Refusal::Forbidden {
            reason: ForbiddenReason::NotMigrationHolder,
        };
        assert_eq!(forbidden.status_code(), 403);
        assert_eq!(
            json_of(&forbidden),
            json!({"error":"forbidden","reason":"not_migration_holder"})
        );
        let invalid = Refusal::InvalidRequest {
            field: "operationId",
            message: "must not be empty".into(),
        };
        assert_eq!(invalid.status_code(), 400);
        assert_eq!(
            json_of(&invalid),
            json!({"error":"invalid_request","field":"operationId","message":"must not be empty"})
        );
        for refusal in [
            held,
            revoked,
            unstable,
            forbidden,
            invalid,
            Refusal::NotFound,
        ] {
            assert_eq!(json_of(&refusal)["error"], refusal.error_code());
        }
    }

    #[test]
    fn seed_003_retry_after_seconds_rounds_up_and_is_at_least_one() {
        assert_eq!(
            Refusal::unstable(Duration::from_millis(1_500)),
            Refusal::Unstable {
                retry_after_seconds: 2
            }
        );
        assert_eq!(
            Refusal::unstable(Duration::ZERO),
            Refusal::Unstable {
                retry_after_seconds: 1
            }
        );
    }

    #[test]
    fn seed_003_token_only_in_post_responses() {
        let grant = Grant {
            kind: LeaseKind::FailoverHold,
            operation_id: "a1".into(),
            instance: "counter-app".into(),
            token: LeaseToken::new("tok"),
            expires_at: EXPIRES,
            topology_generation: 17,
        };
        let granted = AcquireOutcome::Granted(grant.clone());
        assert_eq!(granted.status_code(), 201);
        assert_eq!(
            json_of(&granted.body()),
            json!({"kind":"failover-hold","operationId":"a1","token":"tok","expiresAt":"2026-11-30T02:55:58.123Z","topologyGeneration":17})
        );
        assert_eq!(AcquireOutcome::Rotated(grant).status_code(), 200);
        let renewed = RenewOutcome::Renewed(Renewal {
            kind: LeaseKind::Migration,
            operation_id: "a1".into(),
            instance: "counter-app".into(),
            expires_at: EXPIRES,
            topology_generation: 17,
        });
        assert_eq!(renewed.status_code(), 200);
        assert_eq!(
            json_of(&renewed.body()),
            json!({"kind":"migration","operationId":"a1","expiresAt":"2026-11-30T02:55:58.123Z","topologyGeneration":17})
        );
        let released = ReleaseOutcome::Released {
            kind: LeaseKind::Migration,
            operation_id: "a1".into(),
            instance: "counter-app".into(),
        };
        assert_eq!(released.status_code(), 204);
        assert!(released.body().is_none());
        let refused = ReleaseOutcome::Refused(Refusal::NotFound);
        assert_eq!(refused.status_code(), 404);
        assert_eq!(
            refused.body().map(|body| json_of(&body)),
            Some(json!({"error":"not_found"}))
        );
    }
}
