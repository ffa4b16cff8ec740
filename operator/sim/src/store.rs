//! The simulated Kubernetes API as far as the operator and the invariants see it: the
//! `MysqlFailoverGroup`'s status (the operator's persisted memory) and annotations, the
//! `DNSEndpoint`, pod labels, node taints, and the deploy-lease objects.
//!
//! With `--state-loss`, an operator restart may lose the status copy and the annotation copy
//! of the cooldown, each independently (docs/design/requirements.md R001.10: only when both
//! writes are lost across a restart can a restarted operator promote early). The status copy is
//! lost in one of two ways, drawn per loss: the whole status reverts to what it was before the
//! write that set the current cooldown (that write and every later one were rejected), or only
//! the `cooldownUntil` field is gone.

use crate::world::SITE_NAMES;
use bloodraven_api::names;
use bloodraven_api::{DNSEndpointSpec, MysqlFailoverGroupStatus};
use bloodraven_core::deploy::DeployLeases;
use bloodraven_core::engine::{FailoverNote, GroupAnnotations, NoteReading, PodRole};
use bloodraven_core::time::Timestamp;
use std::collections::{BTreeMap, BTreeSet};

/// Name of the simulated group.
pub const GROUP: &str = names::PLAYGROUND_GROUP;

/// Namespace of the simulated group.
pub const NAMESPACE: &str = names::PLAYGROUND_NAMESPACE;

/// ClusterIP of a site's internal Service.
pub fn cluster_ip(site: usize) -> String {
    format!("10.96.0.{}", 10 + site)
}

/// Node of a site's pod.
pub fn node_name(site: usize) -> String {
    format!("node-{}", SITE_NAMES[site])
}

/// The site whose canonical replication source host is `host`.
pub fn site_of_source_host(host: &str) -> Option<usize> {
    (0..SITE_NAMES.len()).find(|&site| {
        host == names::source_host(GROUP, SITE_NAMES[site], NAMESPACE)
            || host == names::site_service(GROUP, SITE_NAMES[site])
    })
}

/// The site whose name is `name`.
pub fn site_index(name: &str) -> Option<usize> {
    SITE_NAMES.iter().position(|&site| site == name)
}

/// The API objects.
#[derive(Debug, Default)]
pub struct ApiStore {
    /// The group's status, as the operator writes it (`GroupMemory::to_status`); `None` until
    /// first written. A restarted operator resumes from it with `GroupMemory::from_status`.
    pub status: Option<MysqlFailoverGroupStatus>,
    /// What the status was before the write that set the current cooldown.
    status_before_cooldown: Option<MysqlFailoverGroupStatus>,
    /// The group's annotations.
    pub annotations: BTreeMap<String, String>,
    /// The `DNSEndpoint` spec, if the object exists.
    pub dns: Option<DNSEndpointSpec>,
    /// Pod labels: role and healthy, per site.
    pub labels: BTreeMap<usize, (PodRole, bool)>,
    /// Tainted nodes.
    pub taints: BTreeSet<String>,
    /// The deploy leases and tombstones.
    pub deploy: DeployLeases,
}

impl ApiStore {
    /// An empty API: no status, no annotations, no DNS record.
    pub fn new() -> ApiStore {
        ApiStore::default()
    }

    /// The site the DNS record points at, if any.
    pub fn dns_target_site(&self) -> Option<usize> {
        let target = self.dns.as_ref()?.endpoints.first()?.targets.first()?;
        (0..SITE_NAMES.len()).find(|&site| *target == cluster_ip(site))
    }

    /// Writes `bloodraven.shipstream.io/planned-failover=<site>`.
    pub fn request_planned_failover(&mut self, site: &str) {
        self.annotations.insert(
            names::ANNOTATION_PLANNED_FAILOVER.to_string(),
            site.to_string(),
        );
    }

    /// The annotations as `decide` reads them.
    pub fn group_annotations(&self) -> GroupAnnotations {
        GroupAnnotations {
            planned_failover: self
                .annotations
                .get(names::ANNOTATION_PLANNED_FAILOVER)
                .cloned(),
            revoke_deployment_leases: self
                .annotations
                .contains_key(names::ANNOTATION_REVOKE_DEPLOYMENT_LEASES),
            cooldown_until: self
                .annotations
                .get(names::ANNOTATION_COOLDOWN_UNTIL)
                .and_then(|text| text.parse::<Timestamp>().ok()),
            backup: self.annotations.get(names::ANNOTATION_BACKUP).cloned(),
            restore: self.annotations.get(names::ANNOTATION_RESTORE).cloned(),
            rejoin: self.annotations.get(names::ANNOTATION_REJOIN).cloned(),
            last_failover: self
                .annotations
                .get(names::ANNOTATION_LAST_FAILOVER)
                // Only the simulated operator writes it, and the live shell signs what it
                // writes with the group's key: it reads back verified.
                .and_then(|text| {
                    FailoverNote::read(text).map(|read| read.map(NoteReading::verified))
                }),
        }
    }

    /// Writes the status (the operator's memory as `GroupMemory::to_status` renders it).
    pub fn write_status(&mut self, status: MysqlFailoverGroupStatus) {
        let previous_cooldown = self.status.as_ref().and_then(|s| s.cooldown_until);
        if status.cooldown_until != previous_cooldown {
            self.status_before_cooldown = self.status.clone();
        }
        self.status = Some(status);
    }

    /// `status.activeSite`, if any.
    pub fn status_active_site(&self) -> Option<&str> {
        self.status.as_ref().and_then(|s| s.active_site.as_deref())
    }

    /// `status.topologyGeneration` (0 without a status).
    pub fn status_generation(&self) -> u64 {
        self.status.as_ref().map_or(0, |s| s.topology_generation)
    }

    /// State loss, whole-object form: every status write since the one that set the cooldown
    /// was rejected, so the status reverts to what it was before it.
    pub fn revert_status(&mut self) {
        if let Some(previous) = self.status_before_cooldown.take() {
            self.status = Some(previous);
        }
    }

    /// State loss, field form: `status.cooldownUntil` alone is gone (a writer with an older
    /// schema replaced the status and dropped the field); everything else survived.
    pub fn drop_status_cooldown(&mut self) {
        if let Some(status) = self.status.as_mut() {
            status.cooldown_until = None;
        }
    }

    /// State loss: the annotation copy of the cooldown is gone.
    pub fn lose_annotation_copy(&mut self) {
        self.annotations.remove(names::ANNOTATION_COOLDOWN_UNTIL);
    }

    /// The later of the two persisted cooldown copies.
    pub fn persisted_cooldown_until(&self) -> Option<Timestamp> {
        let status = self.status.as_ref().and_then(|s| s.cooldown_until);
        let annotation = self.group_annotations().cooldown_until;
        status.max(annotation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // docs/design/operator.md#surfaces-moved-on-promotion: the A record targets the active site's
    // internal Service ClusterIP; the client follows it back to the site.
    #[test]
    fn dns_target_maps_back_to_its_site() {
        let mut store = ApiStore::new();
        assert_eq!(store.dns_target_site(), None);
        store.dns = Some(DNSEndpointSpec::a_record("db", &cluster_ip(1), 10));
        assert_eq!(store.dns_target_site(), Some(1));
    }

    // docs/design/requirements.md R000.3: the canonical replication source host is the site's
    // internal Service.
    #[test]
    fn canonical_source_host_maps_back_to_its_site() {
        let host = names::source_host(GROUP, "reader", NAMESPACE);
        assert_eq!(site_of_source_host(&host), Some(2));
        assert_eq!(site_of_source_host("mysql-other-iad"), None);
    }

    // docs/design/requirements.md R001.10: the two cooldown copies are lost independently; the
    // later surviving one counts.
    #[test]
    fn cooldown_copies_are_lost_independently() {
        let mut store = ApiStore::new();
        store.annotations.insert(
            names::ANNOTATION_COOLDOWN_UNTIL.to_string(),
            Timestamp::from_unix_millis(5_000).to_string(),
        );
        assert_eq!(
            store.persisted_cooldown_until(),
            Some(Timestamp::from_unix_millis(5_000))
        );
        store.lose_annotation_copy();
        assert_eq!(store.persisted_cooldown_until(), None);
    }
}
