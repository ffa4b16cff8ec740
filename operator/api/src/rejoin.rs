//! Status of the rejoin of a returning primary (docs/design/operator.md#returning-primary;
//! issue 35): `status.sites[].rejoin` of a [`MysqlFailoverGroup`](crate::MysqlFailoverGroup).
//!
//! A demoted old primary holding errant transactions (GTIDs the active site lacks) stays
//! fenced. `kubectl bloodraven rejoin <group> <site>` (the annotation
//! [`ANNOTATION_REJOIN`](crate::names::ANNOTATION_REJOIN)), or `spec.returningPrimary.onErrant:
//! rejoin`, brings it back: its errant transactions and a full dump are archived on its
//! backups volume first, then it is re-seeded from the active site, and only then is it a
//! replica again.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{Admission, Timestamp};

/// Phase of a rejoin.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum RejoinPhase {
    /// Checking the site, the authority, other operations in flight and holds.
    Requested,
    /// Parked behind a live failover-hold until `admission.retryTime`.
    Deferred,
    /// The site is fenced explicitly and its sidecar archives the errant transactions and a
    /// full dump (`POST /v1/archive`).
    Archiving,
    /// The archive is complete; the site is re-seeded from the active site (`POST /v1/reseed`)
    /// and waits to be seen replicating directly from it, holding nothing it lacks.
    Reseeding,
    /// The site is a replica again (`role=replica`, an emergency candidate again).
    Completed,
    /// Stopped after it started; `message` says why. The site stays fenced and any archive
    /// written is kept.
    Failed,
    /// Refused before anything was done; `message` says why. The site is as it was.
    Refused,
}

impl RejoinPhase {
    /// Whether the rejoin has stopped (completed, failed or refused).
    pub fn is_final(self) -> bool {
        match self {
            RejoinPhase::Completed | RejoinPhase::Failed | RejoinPhase::Refused => true,
            RejoinPhase::Requested
            | RejoinPhase::Deferred
            | RejoinPhase::Archiving
            | RejoinPhase::Reseeding => false,
        }
    }
}

/// The rejoin of one returning primary: what is archived, where it is, and when each step
/// happened.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RejoinStatus {
    /// Current phase.
    pub phase: RejoinPhase,
    /// true: started by `spec.returningPrimary.onErrant: rejoin`; false: requested by the
    /// annotation (`kubectl bloodraven rejoin`).
    #[serde(default)]
    pub automatic: bool,
    /// The active site the rejoin re-seeds the site from (the one when it was admitted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_site: Option<String>,
    /// Identifies this rejoin: the archive and re-seed jobs' `restoreId` on the site's sidecar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejoin_id: Option<u64>,
    /// The archive's name: `archives/<archive>/` on the site's backups volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<String>,
    /// The errant GTID set the archive holds (what the site held that the active site
    /// lacked when the rejoin was admitted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errant_gtid_set: Option<String>,
    /// Admission detail (a failover-hold deferring it).
    #[serde(default)]
    pub admission: Admission,
    /// What happened last, or why it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the request was first seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_at: Option<Timestamp>,
    /// When the current phase was entered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_since: Option<Timestamp>,
    /// When the sidecar reported the archive complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived_at: Option<Timestamp>,
    /// When the sidecar reported the re-seed complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reseeded_at: Option<Timestamp>,
    /// When the site was a replica again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Timestamp>,
}

impl RejoinStatus {
    /// A request seen at `now`, nothing done yet.
    pub fn requested(automatic: bool, now: Timestamp, message: String) -> RejoinStatus {
        RejoinStatus {
            phase: RejoinPhase::Requested,
            automatic,
            active_site: None,
            rejoin_id: None,
            archive: None,
            errant_gtid_set: None,
            admission: Admission::default(),
            message: Some(message),
            requested_at: Some(now),
            phase_since: Some(now),
            archived_at: None,
            reseeded_at: None,
            completed_at: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejoin_status_round_trips_in_camel_case() {
        let mut status = RejoinStatus::requested(
            true,
            Timestamp::from_unix_millis(1_000),
            "requested".to_owned(),
        );
        status.phase = RejoinPhase::Archiving;
        status.archive = Some("rejoin-iad-1".to_owned());
        status.errant_gtid_set = Some("0-1-11..13".to_owned());
        status.rejoin_id = Some(1);
        let text = serde_json::to_string(&status).expect("encode");
        assert!(text.contains("\"errantGtidSet\":\"0-1-11..13\""), "{text}");
        assert!(text.contains("\"phase\":\"Archiving\""), "{text}");
        let back: RejoinStatus = serde_json::from_str(&text).expect("decode");
        assert_eq!(back, status);
        assert!(!RejoinPhase::Archiving.is_final());
        assert!(RejoinPhase::Refused.is_final());
    }
}
