//! What the shell stores, as pure conversions over `BTreeMap<String, String>`.
//!
//! - Each lease is a `coordination.k8s.io/v1` Lease named `bloodraven-deploy-<group>-<kind>`
//!   ([`lease_object_name`]); the operation lives in its annotations ([`LeaseRecord::to_annotations`]).
//!   The annotations are the source of truth; the shell may mirror them into the Lease spec
//!   (`holderIdentity` = operationId, `leaseDurationSeconds` = TTL) for `kubectl get lease`.
//! - Tombstones live in one ConfigMap per group ([`tombstone_config_map_name`]), one data entry
//!   per revoked lease: key `<kind>.<operationId>`, value a JSON object
//!   ([`tombstones_to_data`], [`tombstones_from_data`]).
//!
//! Only the SHA-256 of a token is ever written, never the token. Timestamps are RFC 3339 with
//! milliseconds, which round-trips [`Timestamp`] exactly.

use std::{collections::BTreeMap, time::Duration};

use bloodraven_api::names;
use serde_json::{Map, Value};

use super::{
    error::{Error, Result},
    model::{
        check_instance, check_operation_id, LeaseKind, LeaseRecord, RevokeReason, TokenHash,
        Tombstone, TTL_SECONDS_MAX, TTL_SECONDS_MIN,
    },
};
use crate::time::Timestamp;

/// Lease annotation: `migration` or `failover-hold`.
pub const ANNOTATION_KIND: &str = "bloodraven.shipstream.io/deploy-kind";
/// Lease annotation: the holder's `operationId`.
pub const ANNOTATION_OPERATION_ID: &str = "bloodraven.shipstream.io/deploy-operation-id";
/// Lease annotation: the holder's `instance` (`MysqlDatabase` name).
pub const ANNOTATION_INSTANCE: &str = "bloodraven.shipstream.io/deploy-instance";
/// Lease annotation: lowercase hex SHA-256 of the current token.
pub const ANNOTATION_TOKEN_SHA256: &str = "bloodraven.shipstream.io/deploy-token-sha256";
/// Lease annotation: when the operation first got the lease (RFC 3339).
pub const ANNOTATION_GRANTED_AT: &str = "bloodraven.shipstream.io/deploy-granted-at";
/// Lease annotation: the last confirmed deadline (RFC 3339).
pub const ANNOTATION_EXPIRES_AT: &str = "bloodraven.shipstream.io/deploy-expires-at";
/// Lease annotation: the clamped TTL in whole seconds.
pub const ANNOTATION_TTL_SECONDS: &str = "bloodraven.shipstream.io/deploy-ttl-seconds";
/// Lease annotation: the topology generation the lease was granted under.
pub const ANNOTATION_TOPOLOGY_GENERATION: &str =
    "bloodraven.shipstream.io/deploy-topology-generation";

const FIELD_OPERATION_ID: &str = "operationId";
const FIELD_KIND: &str = "kind";
const FIELD_INSTANCE: &str = "instance";
const FIELD_TOKEN_SHA256: &str = "tokenSha256";
const FIELD_REASON: &str = "reason";
const FIELD_TOPOLOGY_GENERATION: &str = "topologyGeneration";
const FIELD_REVOKED_AT: &str = "revokedAt";

/// The Lease object holding `kind` for `group`: `bloodraven-deploy-<group>-<kind>`.
pub fn lease_object_name(group: &str, kind: LeaseKind) -> String {
    names::deploy_lease(group, kind.as_str())
}

/// The ConfigMap holding `group`'s tombstones: `bloodraven-deploy-<group>-tombstones`.
pub fn tombstone_config_map_name(group: &str) -> String {
    names::deploy_tombstones(group)
}

impl LeaseRecord {
    /// The annotations the shell puts on the lease's Lease object.
    pub fn to_annotations(&self) -> BTreeMap<String, String> {
        [
            (ANNOTATION_KIND, self.kind.as_str().to_string()),
            (ANNOTATION_OPERATION_ID, self.operation_id.clone()),
            (ANNOTATION_INSTANCE, self.instance.clone()),
            (ANNOTATION_TOKEN_SHA256, self.token_hash.to_hex()),
            (ANNOTATION_GRANTED_AT, self.granted_at.to_string()),
            (ANNOTATION_EXPIRES_AT, self.expires_at.to_string()),
            (ANNOTATION_TTL_SECONDS, self.ttl.as_secs().to_string()),
            (
                ANNOTATION_TOPOLOGY_GENERATION,
                self.topology_generation.to_string(),
            ),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_string(), value))
        .collect()
    }

    /// Reads a lease back from its Lease object's annotations; other annotations are ignored.
    /// The error names the missing or bad annotation.
    pub fn from_annotations(annotations: &BTreeMap<String, String>) -> Result<Self> {
        let field = |key: &str| {
            annotations
                .get(key)
                .map(|value| (key.to_string(), value.as_str()))
                .ok_or_else(|| Error::MissingField {
                    field: key.to_string(),
                })
        };
        Ok(LeaseRecord {
            kind: parse_kind(field(ANNOTATION_KIND)?)?,
            operation_id: parse_operation_id(field(ANNOTATION_OPERATION_ID)?)?,
            instance: parse_instance(field(ANNOTATION_INSTANCE)?)?,
            token_hash: parse_token_hash(field(ANNOTATION_TOKEN_SHA256)?)?,
            granted_at: parse_timestamp(field(ANNOTATION_GRANTED_AT)?)?,
            expires_at: parse_timestamp(field(ANNOTATION_EXPIRES_AT)?)?,
            ttl: parse_ttl(field(ANNOTATION_TTL_SECONDS)?)?,
            topology_generation: parse_generation(field(ANNOTATION_TOPOLOGY_GENERATION)?)?,
        })
    }
}

impl Tombstone {
    /// The tombstone's ConfigMap data key: `<kind>.<operationId>`.
    pub fn data_key(&self) -> String {
        format!("{}.{}", self.kind.as_str(), self.operation_id)
    }

    /// The tombstone's ConfigMap data value: a JSON object with `operationId`, `kind`,
    /// `instance`, `tokenSha256`, `reason`, `topologyGeneration` and `revokedAt`.
    pub fn to_data_value(&self) -> String {
        let object: Map<String, Value> = [
            (FIELD_OPERATION_ID, Value::from(self.operation_id.as_str())),
            (FIELD_KIND, Value::from(self.kind.as_str())),
            (FIELD_INSTANCE, Value::from(self.instance.as_str())),
            (FIELD_TOKEN_SHA256, Value::from(self.token_hash.to_hex())),
            (FIELD_REASON, Value::from(self.reason.as_str())),
            (
                FIELD_TOPOLOGY_GENERATION,
                Value::from(self.topology_generation),
            ),
            (FIELD_REVOKED_AT, Value::from(self.revoked_at.to_string())),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_string(), value))
        .collect();
        Value::Object(object).to_string()
    }

    /// Reads one ConfigMap data entry back. The key must agree with the value's `kind` and
    /// `operationId`; errors name the field as `data[<key>].<field>`.
    pub fn from_data_entry(key: &str, value: &str) -> Result<Self> {
        let path = |field: &str| format!("data[{key:?}].{field}");
        let entry = format!("data[{key:?}]");
        let parsed: Value = serde_json::from_str(value).map_err(|error| Error::InvalidField {
            field: entry.clone(),
            value: value.to_string(),
            reason: format!("is not JSON: {error}"),
        })?;
        let Value::Object(object) = parsed else {
            return Err(Error::InvalidField {
                field: entry,
                value: value.to_string(),
                reason: "is not a JSON object".to_string(),
            });
        };
        let text = |field: &str| -> Result<(String, &str)> {
            match object.get(field) {
                None => Err(Error::MissingField { field: path(field) }),
                Some(Value::String(text)) => Ok((path(field), text.as_str())),
                Some(other) => Err(Error::InvalidField {
                    field: path(field),
                    value: other.to_string(),
                    reason: "is not a string".to_string(),
                }),
            }
        };
        let topology_generation = match object.get(FIELD_TOPOLOGY_GENERATION) {
            None => {
                return Err(Error::MissingField {
                    field: path(FIELD_TOPOLOGY_GENERATION),
                })
            }
            Some(number) => number.as_u64().ok_or_else(|| Error::InvalidField {
                field: path(FIELD_TOPOLOGY_GENERATION),
                value: number.to_string(),
                reason: "is not a non-negative integer".to_string(),
            })?,
        };
        let tombstone = Tombstone {
            operation_id: parse_operation_id(text(FIELD_OPERATION_ID)?)?,
            kind: parse_kind(text(FIELD_KIND)?)?,
            instance: parse_instance(text(FIELD_INSTANCE)?)?,
            token_hash: parse_token_hash(text(FIELD_TOKEN_SHA256)?)?,
            reason: parse_reason(text(FIELD_REASON)?)?,
            topology_generation,
            revoked_at: parse_timestamp(text(FIELD_REVOKED_AT)?)?,
        };
        if tombstone.data_key() != key {
            return Err(Error::InvalidField {
                field: entry,
                value: key.to_string(),
                reason: format!("does not match its value's key {:?}", tombstone.data_key()),
            });
        }
        Ok(tombstone)
    }
}

/// The tombstone ConfigMap's `data`.
pub fn tombstones_to_data<'a>(
    tombstones: impl IntoIterator<Item = &'a Tombstone>,
) -> BTreeMap<String, String> {
    tombstones
        .into_iter()
        .map(|tombstone| (tombstone.data_key(), tombstone.to_data_value()))
        .collect()
}

/// Reads every tombstone from the ConfigMap's `data`; the first bad entry fails the whole
/// read (a lost tombstone would let a revoked operation back in).
pub fn tombstones_from_data(data: &BTreeMap<String, String>) -> Result<Vec<Tombstone>> {
    data.iter()
        .map(|(key, value)| Tombstone::from_data_entry(key, value))
        .collect()
}

fn invalid(field: String, value: &str, reason: impl Into<String>) -> Error {
    Error::InvalidField {
        field,
        value: value.to_string(),
        reason: reason.into(),
    }
}

fn parse_kind((field, value): (String, &str)) -> Result<LeaseKind> {
    value
        .parse()
        .map_err(|error: super::model::UnknownLeaseKind| invalid(field, value, error.to_string()))
}

fn parse_operation_id((field, value): (String, &str)) -> Result<String> {
    check_operation_id(value).map_err(|reason| invalid(field, value, reason))?;
    Ok(value.to_string())
}

fn parse_instance((field, value): (String, &str)) -> Result<String> {
    check_instance(value).map_err(|reason| invalid(field, value, reason))?;
    Ok(value.to_string())
}

fn parse_token_hash((field, value): (String, &str)) -> Result<TokenHash> {
    TokenHash::from_hex(value).ok_or_else(|| invalid(field, value, "is not 64 hex digits"))
}

fn parse_timestamp((field, value): (String, &str)) -> Result<Timestamp> {
    value
        .parse()
        .map_err(|error: bloodraven_api::Error| invalid(field, value, error.to_string()))
}

fn parse_ttl((field, value): (String, &str)) -> Result<Duration> {
    let seconds: u64 = value
        .parse()
        .map_err(|_| invalid(field.clone(), value, "is not a whole number of seconds"))?;
    if !(TTL_SECONDS_MIN..=TTL_SECONDS_MAX).contains(&seconds) {
        return Err(invalid(field, value, "is outside the TTL clamp [5, 120]"));
    }
    Ok(Duration::from_secs(seconds))
}

fn parse_generation((field, value): (String, &str)) -> Result<u64> {
    value
        .parse()
        .map_err(|_| invalid(field, value, "is not a non-negative integer"))
}

fn parse_reason((field, value): (String, &str)) -> Result<RevokeReason> {
    match value {
        "TopologyChanged" => Ok(RevokeReason::TopologyChanged),
        "OperatorRevoked" => Ok(RevokeReason::OperatorRevoked),
        _ => Err(invalid(
            field,
            value,
            "is not TopologyChanged or OperatorRevoked",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deploy::model::LeaseToken;

    fn record() -> LeaseRecord {
        LeaseRecord {
            kind: LeaseKind::FailoverHold,
            operation_id: "a1c3f0e2-9b7d-4c1e-8f00-1234567890ab".into(),
            instance: "counter-app".into(),
            token_hash: LeaseToken::new("the-token").hash(),
            granted_at: Timestamp::from_unix_millis(1_796_007_358_123),
            expires_at: Timestamp::from_unix_millis(1_796_007_388_123),
            ttl: Duration::from_secs(30),
            topology_generation: 17,
        }
    }

    fn tombstone() -> Tombstone {
        Tombstone {
            operation_id: "a1.b_c-d".into(),
            kind: LeaseKind::Migration,
            instance: "counter-app".into(),
            token_hash: LeaseToken::new("the-token").hash(),
            reason: RevokeReason::TopologyChanged,
            topology_generation: 18,
            revoked_at: Timestamp::from_unix_millis(1_796_007_360_000),
        }
    }

    #[test]
    fn seed_003_lease_objects_are_named_per_group_and_kind() {
        assert_eq!(
            lease_object_name("playground", LeaseKind::Migration),
            "bloodraven-deploy-playground-migration"
        );
        assert_eq!(
            lease_object_name("playground", LeaseKind::FailoverHold),
            "bloodraven-deploy-playground-failover-hold"
        );
        assert_eq!(
            tombstone_config_map_name("playground"),
            "bloodraven-deploy-playground-tombstones"
        );
    }

    #[test]
    fn seed_003_lease_annotations_round_trip_and_hold_the_hash_not_the_token() {
        let record = record();
        let mut annotations = record.to_annotations();
        assert!(annotations
            .values()
            .all(|value| !value.contains("the-token")));
        assert_eq!(
            annotations.get(ANNOTATION_TOKEN_SHA256),
            Some(&record.token_hash.to_hex())
        );
        assert_eq!(
            annotations.get(ANNOTATION_EXPIRES_AT).map(String::as_str),
            Some("2026-11-30T02:56:28.123Z")
        );
        annotations.insert("kubectl.kubernetes.io/last-applied".into(), "{}".into());
        assert_eq!(LeaseRecord::from_annotations(&annotations), Ok(record));
    }

    #[test]
    fn lease_decode_errors_name_the_bad_annotation() {
        let good = record().to_annotations();
        for key in [
            ANNOTATION_KIND,
            ANNOTATION_OPERATION_ID,
            ANNOTATION_INSTANCE,
            ANNOTATION_TOKEN_SHA256,
            ANNOTATION_GRANTED_AT,
            ANNOTATION_EXPIRES_AT,
            ANNOTATION_TTL_SECONDS,
            ANNOTATION_TOPOLOGY_GENERATION,
        ] {
            let mut missing = good.clone();
            missing.remove(key);
            assert_eq!(
                LeaseRecord::from_annotations(&missing),
                Err(Error::MissingField { field: key.into() })
            );
            let mut bad = good.clone();
            bad.insert(key.into(), "bad value!".into());
            let error = LeaseRecord::from_annotations(&bad).expect_err("bad value rejected");
            assert!(error.to_string().contains(key), "{error}");
        }
        let mut ttl = good;
        ttl.insert(ANNOTATION_TTL_SECONDS.into(), "121".into());
        let error = LeaseRecord::from_annotations(&ttl).expect_err("ttl outside clamp");
        assert!(error.to_string().contains("[5, 120]"), "{error}");
    }

    #[test]
    fn seed_003_tombstones_round_trip_through_config_map_data() {
        let first = tombstone();
        let second = Tombstone {
            kind: LeaseKind::FailoverHold,
            reason: RevokeReason::OperatorRevoked,
            ..tombstone()
        };
        let data = tombstones_to_data([&first, &second]);
        assert_eq!(
            data.keys().collect::<Vec<_>>(),
            ["failover-hold.a1.b_c-d", "migration.a1.b_c-d"]
        );
        assert!(data.values().all(|value| !value.contains("the-token")));
        let mut read = tombstones_from_data(&data).expect("round trip");
        read.sort_by_key(|tombstone| tombstone.kind);
        assert_eq!(read, vec![first, second]);
    }

    #[test]
    fn tombstone_decode_errors_name_the_bad_field() {
        let good = tombstone();
        let key = good.data_key();
        let value: Value = serde_json::from_str(&good.to_data_value()).expect("json");
        for field in [
            FIELD_OPERATION_ID,
            FIELD_KIND,
            FIELD_INSTANCE,
            FIELD_TOKEN_SHA256,
            FIELD_REASON,
            FIELD_TOPOLOGY_GENERATION,
            FIELD_REVOKED_AT,
        ] {
            let mut missing = value.clone();
            if let Value::Object(object) = &mut missing {
                object.remove(field);
            }
            let error = Tombstone::from_data_entry(&key, &missing.to_string())
                .expect_err("missing field rejected");
            assert_eq!(
                error,
                Error::MissingField {
                    field: format!("data[{key:?}].{field}")
                }
            );
            let mut bad = value.clone();
            if let Value::Object(object) = &mut bad {
                object.insert(field.into(), Value::from("bad value!"));
            }
            let error =
                Tombstone::from_data_entry(&key, &bad.to_string()).expect_err("bad field rejected");
            assert!(error.to_string().contains(field), "{error}");
        }
        let error = Tombstone::from_data_entry("migration.other", &good.to_data_value())
            .expect_err("key mismatch rejected");
        assert!(error.to_string().contains("migration.other"), "{error}");
        let error = Tombstone::from_data_entry(&key, "not json").expect_err("not json");
        assert!(error.to_string().contains(&key), "{error}");
    }
}
