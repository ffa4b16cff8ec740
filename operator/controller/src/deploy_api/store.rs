//! Deploy leases persisted in the cluster (docs/design/operator.md#deploy-lease-api): one
//! `coordination.k8s.io/v1` Lease per kind, `bloodraven-deploy-<group>-<kind>`, carrying the
//! record in annotations (token hashes, never tokens), and one ConfigMap of tombstones per
//! group. Restarting the operator releases nothing and resets nothing
//! (docs/design/requirements.md R003.15).
//!
//! Every load-modify-save runs under one process-wide lock shared by the deploy API and the
//! poll loop; only the leader does either. The lock also guards the failover-hold gates
//! ([`crate::hold_gate`]).

use bloodraven_core::deploy::{codec, DeployLeases, LeaseKind, LeaseRecord, Tombstone};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client};
use tokio::sync::MutexGuard;

use crate::error::{Error, Result};
use crate::hold_gate::{GateLock, HoldGates};
use crate::render::{apply_body, LABEL_MANAGED_BY, MANAGED_BY};

/// The Lease object of one stored deploy lease (pure).
pub fn lease_object(
    namespace: &str,
    group: &str,
    record: &LeaseRecord,
    owner: Option<OwnerReference>,
) -> Lease {
    let micro = |timestamp: bloodraven_api::Timestamp| {
        jiff::Timestamp::from_millisecond(timestamp.unix_millis())
            .ok()
            .map(MicroTime)
    };
    Lease {
        metadata: ObjectMeta {
            name: Some(codec::lease_object_name(group, record.kind)),
            namespace: Some(namespace.to_string()),
            annotations: Some(record.to_annotations()),
            labels: Some(
                [
                    (
                        bloodraven_api::names::LABEL_INSTANCE.to_string(),
                        group.to_string(),
                    ),
                    (LABEL_MANAGED_BY.to_string(), MANAGED_BY.to_string()),
                ]
                .into_iter()
                .collect(),
            ),
            owner_references: owner.map(|owner| vec![owner]),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(format!("{}/{}", record.instance, record.operation_id)),
            lease_duration_seconds: i32::try_from(record.ttl.as_secs()).ok(),
            acquire_time: micro(record.granted_at),
            renew_time: micro(record.expires_at.saturating_sub(record.ttl)),
            ..LeaseSpec::default()
        }),
    }
}

/// The tombstone ConfigMap apply body holding `tombstones` (pure).
pub fn tombstone_config_map<'a>(
    namespace: &str,
    group: &str,
    tombstones: impl IntoIterator<Item = &'a Tombstone>,
    owner: Option<OwnerReference>,
) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(codec::tombstone_config_map_name(group)),
            namespace: Some(namespace.to_string()),
            labels: Some(
                [
                    (
                        bloodraven_api::names::LABEL_INSTANCE.to_string(),
                        group.to_string(),
                    ),
                    (LABEL_MANAGED_BY.to_string(), MANAGED_BY.to_string()),
                ]
                .into_iter()
                .collect(),
            ),
            owner_references: owner.map(|owner| vec![owner]),
            ..ObjectMeta::default()
        },
        data: Some(codec::tombstones_to_data(tombstones)),
        ..ConfigMap::default()
    }
}

/// Reads and writes deploy leases through the Kubernetes API.
#[derive(Clone)]
pub struct LeaseStore {
    client: Client,
    lock: GateLock,
}

impl LeaseStore {
    /// A store over `client` with its own lock.
    pub fn new(client: Client) -> Self {
        Self::with_lock(client, HoldGates::new_lock())
    }

    /// A store over `client` sharing `lock` (with the deploy API).
    pub fn with_lock(client: Client, lock: GateLock) -> Self {
        Self { client, lock }
    }

    /// Serialises load-modify-save sequences in this process (and guards the gates).
    pub async fn lock(&self) -> MutexGuard<'_, HoldGates> {
        self.lock.lock().await
    }

    /// The shared lock itself, for the failover-hold gate ([`crate::hold_gate`]).
    pub fn gate_lock(&self) -> &GateLock {
        &self.lock
    }

    /// The stored state of `group` (absent objects are empty state).
    pub async fn load(&self, namespace: &str, group: &str) -> Result<DeployLeases> {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), namespace);
        let config_maps: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        let mut records = Vec::new();
        for kind in LeaseKind::ALL {
            let name = codec::lease_object_name(group, kind);
            let found = leases
                .get_opt(&name)
                .await
                .map_err(|error| Error::kube(format!("get lease {namespace}/{name}"), error))?;
            if let Some(lease) = found {
                let annotations = lease.metadata.annotations.unwrap_or_default();
                records.push(LeaseRecord::from_annotations(&annotations)?);
            }
        }
        let name = codec::tombstone_config_map_name(group);
        let tombstones = match config_maps
            .get_opt(&name)
            .await
            .map_err(|error| Error::kube(format!("get configmap {namespace}/{name}"), error))?
        {
            Some(config_map) => codec::tombstones_from_data(&config_map.data.unwrap_or_default())?,
            None => Vec::new(),
        };
        Ok(DeployLeases::from_parts(records, tombstones)?)
    }

    /// Persists the difference between `before` and `after`: tombstones first (a revoked
    /// operation can never come back), then each kind's Lease object applied or deleted.
    pub async fn save(
        &self,
        namespace: &str,
        group: &str,
        before: &DeployLeases,
        after: &DeployLeases,
        owner: Option<OwnerReference>,
    ) -> Result<()> {
        let params = PatchParams::apply(bloodraven_api::names::FIELD_MANAGER).force();
        let new_tombstones = after
            .tombstones()
            .any(|tombstone| !before.tombstones().any(|old| old == tombstone));
        if new_tombstones {
            let config_maps: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
            let body = tombstone_config_map(namespace, group, after.tombstones(), owner.clone());
            let name = codec::tombstone_config_map_name(group);
            config_maps
                .patch(&name, &params, &Patch::Apply(apply_body(&body)))
                .await
                .map_err(|error| {
                    Error::kube(format!("apply configmap {namespace}/{name}"), error)
                })?;
        }
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), namespace);
        for kind in LeaseKind::ALL {
            let name = codec::lease_object_name(group, kind);
            match (before.lease(kind), after.lease(kind)) {
                (old, Some(new)) if old != Some(new) => {
                    let body = lease_object(namespace, group, new, owner.clone());
                    leases
                        .patch(&name, &params, &Patch::Apply(apply_body(&body)))
                        .await
                        .map_err(|error| {
                            Error::kube(format!("apply lease {namespace}/{name}"), error)
                        })?;
                }
                (Some(_), None) => match leases.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(status)) if status.code == 404 => {}
                    Err(error) => {
                        return Err(Error::kube(
                            format!("delete lease {namespace}/{name}"),
                            error,
                        ))
                    }
                },
                _ => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bloodraven_api::Timestamp;
    use bloodraven_core::deploy::{LeaseToken, RevokeReason};

    use super::*;

    fn record() -> LeaseRecord {
        LeaseRecord {
            kind: LeaseKind::FailoverHold,
            operation_id: "a1".into(),
            instance: "counter-app".into(),
            token_hash: LeaseToken::new("secret").hash(),
            granted_at: Timestamp::from_unix_millis(1_000_000),
            expires_at: Timestamp::from_unix_millis(1_040_000),
            ttl: Duration::from_secs(30),
            topology_generation: 17,
        }
    }

    /// docs/design/operator.md#deploy-lease-api: leases are Lease objects
    /// `bloodraven-deploy-<group>-<kind>` with the operation in annotations and the token only
    /// as a hash.
    #[test]
    fn lease_object_carries_the_record_and_never_the_token() {
        let lease = lease_object("ns", "playground", &record(), None);
        assert_eq!(
            lease.metadata.name.as_deref(),
            Some("bloodraven-deploy-playground-failover-hold")
        );
        let annotations = lease.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(LeaseRecord::from_annotations(&annotations), Ok(record()));
        let text = serde_json::to_string(&lease).unwrap_or_default();
        assert!(!text.contains("\"secret\""), "{text}");
        let spec = lease.spec.unwrap_or_default();
        assert_eq!(spec.lease_duration_seconds, Some(30));
        assert_eq!(spec.holder_identity.as_deref(), Some("counter-app/a1"));
        let body = apply_body(&lease_object("ns", "playground", &record(), None));
        assert_eq!(body["apiVersion"], "coordination.k8s.io/v1");
        assert_eq!(body["kind"], "Lease");
    }

    /// docs/design/operator.md#deploy-lease-api, docs/design/requirements.md R003.23:
    /// tombstones live in a ConfigMap per group and load back.
    #[test]
    fn tombstones_round_trip_through_the_config_map() {
        let mut leases = DeployLeases::from_parts([record()], []).expect("state");
        leases.revoke_all(
            RevokeReason::TopologyChanged,
            18,
            Timestamp::from_unix_millis(1_010_000),
        );
        let config_map = tombstone_config_map("ns", "playground", leases.tombstones(), None);
        assert_eq!(
            config_map.metadata.name.as_deref(),
            Some("bloodraven-deploy-playground-tombstones")
        );
        let loaded =
            codec::tombstones_from_data(&config_map.data.unwrap_or_default()).expect("decode");
        assert_eq!(loaded, leases.tombstones().cloned().collect::<Vec<_>>());
    }
}
