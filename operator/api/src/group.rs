//! The `MysqlFailoverGroup` custom resource (short name `mfg`): spec, defaults and status.
//!
//! Defaults (docs/design/operator.md#mysqlfailovergroup): pollInterval 2s, failureThreshold 3,
//! maxLagSeconds 300, failoverCooldown 5m, plannedFailover.onCooldown reject, dns.ttl 60,
//! writeLease.duration = pollInterval × failureThreshold when unset, returningPrimary.onErrant
//! fence.

use std::{collections::BTreeMap, time::Duration};

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{GoDuration, Timestamp};

/// Default `spec.pollInterval`.
pub const DEFAULT_POLL_INTERVAL: GoDuration = GoDuration::from_secs(2);
/// Default `spec.failureThreshold`.
pub const DEFAULT_FAILURE_THRESHOLD: u32 = 3;
/// Default `spec.maxLagSeconds`.
pub const DEFAULT_MAX_LAG_SECONDS: u64 = 300;
/// Default `spec.failoverCooldown`.
pub const DEFAULT_FAILOVER_COOLDOWN: GoDuration = GoDuration::from_secs(300);
/// Default `spec.dns.ttl`.
pub const DEFAULT_DNS_TTL: u32 = 60;

/// The most sites a group may have (`maxItems`): the CEL rules on `spec.sites` need a bound
/// for the API server to accept them (their cost is estimated from it).
pub const SITES_MAX: u32 = 32;
/// The longest site name (`maxLength`): a site name is a DNS label inside object names,
/// label values and DNS names, and the CEL rules comparing names need a bound too.
pub const SITE_NAME_MAX: u32 = 63;
/// What a site name must match: a DNS label (RFC 1123), as the StatefulSet, Service, pod
/// label and DNS names built from it require.
pub const SITE_NAME_PATTERN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/// The shortest `spec.writeLease.duration` in milliseconds: the sidecar refuses a shorter
/// lease (its renewal runs every third of it), so its pod never starts.
pub const WRITE_LEASE_MIN_MILLIS: u8 = 3;

fn default_poll_interval() -> GoDuration {
    DEFAULT_POLL_INTERVAL
}
fn default_failure_threshold() -> u32 {
    DEFAULT_FAILURE_THRESHOLD
}
fn default_max_lag_seconds() -> u64 {
    DEFAULT_MAX_LAG_SECONDS
}
fn default_failover_cooldown() -> GoDuration {
    DEFAULT_FAILOVER_COOLDOWN
}
fn default_dns_ttl() -> u32 {
    DEFAULT_DNS_TTL
}

/// Desired state of a failover group: its sites and the failover policy.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "bloodraven.shipstream.io",
    version = "v1",
    kind = "MysqlFailoverGroup",
    namespaced,
    status = "MysqlFailoverGroupStatus",
    shortname = "mfg",
    printcolumn = r#"{"name":"Active","type":"string","jsonPath":".status.activeSite"}"#,
    printcolumn = r#"{"name":"Generation","type":"integer","jsonPath":".status.topologyGeneration"}"#,
    printcolumn = r#"{"name":"Authority","type":"string","jsonPath":".status.authority.state"}"#,
    printcolumn = r#"{"name":"SpecValid","type":"string","jsonPath":".status.conditions[?(@.type==\"SpecValid\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
// CEL rules the OpenAPI keywords cannot say (docs/design/operator.md, "What the API server
// refuses and what only the operator refuses"); each mirrors a problem of `validate()`.
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "self.sites.exists(s, s.name == self.initialActiveSite)",
        "message": "must be the name of one of spec.sites",
        "fieldPath": ".initialActiveSite",
    },
    {
        "rule": "self.sites.all(s, s.name != self.initialActiveSite || s.role == 'read-write')",
        "message": "must be a read-write site, not a read-only one",
        "fieldPath": ".initialActiveSite",
    },
]))]
pub struct MysqlFailoverGroupSpec {
    /// MySQL flavor of every site.
    #[serde(default)]
    pub flavor: Flavor,
    /// Container image of mysqld (e.g. `mariadb:10.11`).
    pub image: String,
    /// The sites, in order (1 to 32); names are unique.
    #[schemars(length(min = 1, max = SITES_MAX))]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.all(a, self.exists_one(b, b.name == a.name))",
        "message": "site names must be unique",
    }]))]
    pub sites: Vec<SiteSpec>,
    /// The site made writable at bootstrap; must be a read-write site.
    #[schemars(length(max = SITE_NAME_MAX))]
    pub initial_active_site: String,
    /// How often the operator observes every site; positive.
    #[serde(default = "default_poll_interval")]
    #[schemars(pattern(GoDuration::pattern(1)))]
    pub poll_interval: GoDuration,
    /// Consecutive failed polls after which a site is failed; at least 1.
    #[serde(default = "default_failure_threshold")]
    #[schemars(range(min = 1, max = u32::MAX))]
    pub failure_threshold: u32,
    /// Replication lag above which a replica is not healthy.
    #[serde(default = "default_max_lag_seconds")]
    pub max_lag_seconds: u64,
    /// Anti-flap cooldown after every promotion.
    #[serde(default = "default_failover_cooldown")]
    pub failover_cooldown: GoDuration,
    /// Planned failover policy.
    #[serde(default)]
    pub planned_failover: PlannedFailoverPolicy,
    /// Sidecar write lease.
    #[serde(default)]
    pub write_lease: WriteLeaseSpec,
    /// What becomes of a returning primary that holds errant transactions.
    #[serde(default)]
    pub returning_primary: ReturningPrimaryPolicy,
    /// The DNS record pointing at the active site.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<DnsSpec>,
}

impl MysqlFailoverGroupSpec {
    /// Failure detection floor: pollInterval × failureThreshold (6 s on defaults; saturating,
    /// so no spec the parser accepts makes it panic).
    pub fn detection_floor(&self) -> Duration {
        self.poll_interval
            .get()
            .saturating_mul(self.failure_threshold)
    }

    /// The write lease duration: `writeLease.duration`, else the detection floor.
    pub fn effective_write_lease(&self) -> Duration {
        self.write_lease
            .duration
            .map(GoDuration::get)
            .unwrap_or_else(|| self.detection_floor())
    }

    /// The spec of the named site.
    pub fn site(&self, name: &str) -> Option<&SiteSpec> {
        self.sites.iter().find(|site| site.name == name)
    }

    /// `EffectiveReadOnlyMaxLagSeconds` of a site: its own limit, else `maxLagSeconds`.
    pub fn effective_read_only_max_lag_seconds(&self, site: &SiteSpec) -> u64 {
        site.read_only_max_lag_seconds
            .unwrap_or(self.max_lag_seconds)
    }

    /// Problems that make this spec unusable, each naming the field (empty when valid).
    pub fn validate(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.sites.is_empty() {
            problems.push("spec.sites: at least one site is required".to_string());
        }
        for (index, site) in self.sites.iter().enumerate() {
            if self.sites[..index]
                .iter()
                .any(|other| other.name == site.name)
            {
                problems.push(format!(
                    "spec.sites[{index}].name: duplicate site {:?}",
                    site.name
                ));
            }
            if site.name.is_empty() {
                problems.push(format!("spec.sites[{index}].name: must not be empty"));
            }
        }
        match self.site(&self.initial_active_site) {
            None => problems.push(format!(
                "spec.initialActiveSite: {:?} is not one of spec.sites",
                self.initial_active_site
            )),
            Some(site) if site.role != SiteRole::ReadWrite => problems.push(format!(
                "spec.initialActiveSite: {:?} is a read-only site",
                self.initial_active_site
            )),
            Some(_) => {}
        }
        if self.failure_threshold == 0 {
            problems.push("spec.failureThreshold: must be at least 1".to_string());
        }
        if self.poll_interval.get().is_zero() {
            problems.push("spec.pollInterval: must be positive".to_string());
        }
        problems
    }
}

/// MySQL flavor.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Flavor {
    /// MariaDB (default; Debian's mariadb-server, image mariadb:10.11).
    #[default]
    Mariadb,
    /// MySQL 8.4.
    Mysql,
}

/// Whether a site may ever be writable.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum SiteRole {
    /// May become the active, writable site.
    #[serde(rename = "read-write")]
    ReadWrite,
    /// Never writable, never tainted; serves reads when all five conjuncts hold.
    #[serde(rename = "read-only")]
    ReadOnly,
}

/// One site of the group.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SiteSpec {
    /// Site name (`iad`, `pdx`, `reader`): a DNS label.
    #[schemars(length(min = 1, max = SITE_NAME_MAX), pattern(SITE_NAME_PATTERN))]
    pub name: String,
    /// read-write or read-only.
    // maxLength: the CEL rule comparing roles needs a bound (its cost is estimated from it).
    #[schemars(extend("maxLength" = 10))]
    pub role: SiteRole,
    /// Lag limit of a read-only site; null inherits maxLagSeconds, 0 demands zero lag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_max_lag_seconds: Option<u64>,
    /// Node selector of the site's pod (e.g. `topology.kubernetes.io/zone: iad`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
}

/// What a planned failover does inside the cooldown.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnCooldown {
    /// Fail the request (phase Rejected). Default.
    #[default]
    Reject,
    /// Park it in Deferred until cooldownUntil.
    Defer,
}

/// Planned failover policy.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlannedFailoverPolicy {
    /// What a planned failover requested inside the cooldown does.
    #[serde(default)]
    pub on_cooldown: OnCooldown,
}

/// What the operator does with a returning primary (a demoted old active site) that holds
/// errant transactions: GTIDs the active site lacks
/// (docs/design/operator.md#returning-primary).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnErrant {
    /// Keep it `role=fenced` until a human decides (`kubectl bloodraven rejoin`). Default.
    #[default]
    Fence,
    /// Rejoin it without a human once it is readable: its errant transactions and a full dump
    /// are archived on its backups volume first, then it is re-seeded from the active site.
    Rejoin,
}

/// Returning-primary policy.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReturningPrimaryPolicy {
    /// A returning primary with errant transactions: `fence` (default) keeps it fenced,
    /// `rejoin` archives its errant transactions and re-seeds it.
    #[serde(default)]
    pub on_errant: OnErrant,
}

/// The sidecar write lease.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WriteLeaseSpec {
    /// Lease duration, at least 3ms; default pollInterval × failureThreshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(GoDuration::pattern(WRITE_LEASE_MIN_MILLIS)))]
    pub duration: Option<GoDuration>,
}

/// The external DNS record of the group.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DnsSpec {
    /// The A record's name.
    pub hostname: String,
    /// recordTTL of the A record.
    #[serde(default = "default_dns_ttl")]
    #[schemars(range(max = u32::MAX))]
    pub ttl: u32,
}

/// Observed state of a failover group, written only by the leader.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MysqlFailoverGroupStatus {
    /// The site authority names active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_site: Option<String>,
    /// Durable counter of authoritative active-site changes (not metadata.generation).
    #[serde(default)]
    pub topology_generation: u64,
    /// Whether there is a confirmed writable active site.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authority: Option<AuthorityStatus>,
    /// Standard conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Per-site observations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub sites: Vec<SiteStatus>,
    /// End of the anti-flap cooldown (first persisted copy; the annotation is the second).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooldown_until: Option<Timestamp>,
    /// The planned failover in flight or last finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned_failover: Option<PlannedFailoverStatus>,
    /// The ordered update (a change of `spec.image`) in flight or last finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordered_update: Option<OrderedUpdateStatus>,
    /// The last failover.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failover: Option<LastFailover>,
    /// Group health.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthStatus>,
    /// The restore in place in flight or last finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<crate::RestoreStatus>,
    /// The last named backup requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_backup: Option<crate::BackupStatus>,
    /// metadata.generation of the spec this status reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Authority state.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuthorityStatus {
    /// `Valid` or `Invalid`.
    pub state: AuthorityState,
    /// Why authority is invalid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Valid: a confirmed writable active site. Invalid: none; every shared endpoint is shed.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum AuthorityState {
    /// A confirmed writable active site exists.
    Valid,
    /// No confirmed writable active site.
    #[default]
    Invalid,
}

/// A status condition (`type` unique within the list).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Condition type (`Ready`, `Degraded`, `FailoverInProgress`, ...).
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Machine-readable reason.
    #[serde(default)]
    pub reason: String,
    /// Human-readable message.
    #[serde(default)]
    pub message: String,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Timestamp>,
}

/// What the operator last saw of one site.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SiteStatus {
    /// Site name.
    pub name: String,
    /// `primary`, `replica` or `fenced`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Time of the last poll that reached the site (freezes while the operator is down).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen: Option<Timestamp>,
    /// Sidecar and MySQL answered the last poll.
    #[serde(default)]
    pub reachable: bool,
    /// MySQL accepts writes (read_only off).
    #[serde(default)]
    pub writable: bool,
    /// The sidecar holds MySQL fenced.
    #[serde(default)]
    pub fenced: bool,
    /// GTID executed set, flavor text form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gtid_executed: Option<String>,
    /// Replication threads running.
    #[serde(default)]
    pub replicating: bool,
    /// Replication source host as reported by MySQL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_host: Option<String>,
    /// Seconds behind the source; null when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds_behind_source: Option<u64>,
    /// Healthy by the rules of the site's role.
    #[serde(default)]
    pub healthy: bool,
    /// Consecutive failed polls.
    #[serde(default)]
    pub consecutive_failures: u32,
    /// Errant GTID set of a returning old primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errant_gtid_set: Option<String>,
    /// When the mysqld run last observed started (its uptime subtracted from the read
    /// time): a restarted operator compares it with the run it reads to tell a restart of the
    /// active site's mysqld (primary reassertion) that happened while it was away.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mysqld_started_at: Option<Timestamp>,
    /// The rejoin of this site (a returning primary with errant transactions) in flight or
    /// last finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejoin: Option<crate::RejoinStatus>,
}

/// Phase of a planned failover.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PlannedFailoverPhase {
    /// Checking cooldown and holds.
    Admitting,
    /// Parked until `admission.retryTime`.
    Deferred,
    /// Old primary fenced, read_only, connections killed; waiting for the target to converge.
    Draining,
    /// Target being made writable.
    Promoting,
    /// Done with zero lost transactions.
    Completed,
    /// Refused (cooldown with onCooldown=reject, or an invalid target).
    Rejected,
}

/// Why a planned failover was deferred.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum DeferReason {
    /// Inside the anti-flap cooldown with onCooldown=defer.
    Cooldown,
    /// A live failover-hold deployment lease.
    DeploymentHold,
}

/// Admission outcome of a planned failover.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Admission {
    /// Why it is deferred.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defer_reason: Option<DeferReason>,
    /// When admission is retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_time: Option<Timestamp>,
    /// Human-readable detail (names the blocking operationId and instance for a hold).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A planned failover request and its progress.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlannedFailoverStatus {
    /// Current phase.
    pub phase: PlannedFailoverPhase,
    /// Target site.
    pub target: String,
    /// Admission detail.
    #[serde(default)]
    pub admission: Admission,
    /// When the request was first seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_at: Option<Timestamp>,
}

/// Phase of an ordered update (docs/design/operator.md#ordered-update-and-restore-in-place).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum OrderedUpdatePhase {
    /// A changed `spec.image` was seen, or a step finished: the next step waits for the
    /// cooldown, holds and every site's health (`message` says which).
    Admitting,
    /// Parked until `admission.retryTime` (a live failover-hold, or the cooldown with
    /// onCooldown=defer).
    Deferred,
    /// A replica site is being recreated with the new image (`currentSite`), or the update
    /// waits for it to be healthy again.
    RollingReplica,
    /// Every replica runs the new image: a planned failover moves the active site away.
    FailingOver,
    /// The old active site, now a replica, is being recreated with the new image.
    RollingOldActive,
    /// Every site runs the new image and is healthy.
    Completed,
    /// A step failed; `message` says which and why. A new `spec.image` starts a new update.
    Failed,
}

/// One site's image during an ordered update.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrderedUpdateSite {
    /// Site name.
    pub name: String,
    /// The image its pod's `mysql` container runs, as last read (`None`: not known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// It runs the target image and was healthy again after its recreation.
    #[serde(default)]
    pub updated: bool,
}

/// An ordered update and its progress.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrderedUpdateStatus {
    /// Current phase.
    pub phase: OrderedUpdatePhase,
    /// The image every site is moved to (`spec.image` when the update started).
    pub target_image: String,
    /// The site being recreated (or waited for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_site: Option<String>,
    /// The active site the update's planned failover moves away from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover_from: Option<String>,
    /// The site the update's planned failover promotes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover_target: Option<String>,
    /// Deferral detail (deferReason, retryTime, message), as for a planned failover.
    #[serde(default)]
    pub admission: Admission,
    /// What the update does or waits for now; for `Failed`, why it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the update was first seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    /// When the current step began (bounds the wait for a recreated site).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_since: Option<Timestamp>,
    /// Per-site image and progress, in spec order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sites: Vec<OrderedUpdateSite>,
}

/// Kind of a failover.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FailoverKind {
    /// Detected failure of the active site.
    Emergency,
    /// Requested switchover.
    Planned,
}

/// The record of the last failover.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastFailover {
    /// emergency or planned.
    pub kind: FailoverKind,
    /// Old active site.
    pub from: String,
    /// New active site.
    pub to: String,
    /// When the failover started (fault first seen for emergency; admission for planned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    /// When the failure was detected (failureThreshold reached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detected_at: Option<Timestamp>,
    /// When the old site was known not writable (fenced, down, or lease expired).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fenced_at: Option<Timestamp>,
    /// When the new site was made writable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promoted_at: Option<Timestamp>,
    /// When every other site was repointed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Timestamp>,
    /// Transactions of the old primary missing on the new one.
    #[serde(default)]
    pub lost_transactions: u64,
    /// Those transactions as a GTID set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_gtid_set: Option<String>,
    /// false: a lower bound from the last observation; true: measured on the old primary's data.
    #[serde(default)]
    pub exact: bool,
}

/// Group health summary.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthStatus {
    /// Largest replication lag among replicating sites.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_lag_seconds: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAYGROUND: &str = r#"
flavor: mariadb
image: mariadb:10.11
sites:
- {name: iad, role: read-write, nodeSelector: {topology.kubernetes.io/zone: iad}}
- {name: pdx, role: read-write, nodeSelector: {topology.kubernetes.io/zone: pdx}}
- {name: reader, role: read-only, readOnlyMaxLagSeconds: null}
initialActiveSite: iad
maxLagSeconds: 30
failoverCooldown: 30s
dns: {hostname: playground-db.example.local, ttl: 10}
"#;

    /// docs/design/operator.md#mysqlfailovergroup: defaults pollInterval 2s, failureThreshold 3
    /// -> detection floor 6s, write lease defaults to the detection floor, onCooldown reject.
    #[test]
    fn playground_spec_takes_the_design_defaults() {
        let spec: MysqlFailoverGroupSpec = serde_yaml::from_str(PLAYGROUND).expect("parse");
        assert_eq!(spec.poll_interval.get(), Duration::from_secs(2));
        assert_eq!(spec.failure_threshold, 3);
        assert_eq!(spec.detection_floor(), Duration::from_secs(6));
        assert_eq!(spec.effective_write_lease(), Duration::from_secs(6));
        assert_eq!(spec.planned_failover.on_cooldown, OnCooldown::Reject);
        assert_eq!(spec.returning_primary.on_errant, OnErrant::Fence);
        assert_eq!(spec.dns.as_ref().map(|dns| dns.ttl), Some(10));
        assert!(spec.validate().is_empty(), "{:?}", spec.validate());
    }

    /// docs/design/requirements.md R000.8: nil readOnlyMaxLagSeconds inherits maxLagSeconds; an
    /// explicit 0 demands zero.
    #[test]
    fn effective_read_only_max_lag_inherits_or_is_explicit() {
        let mut spec: MysqlFailoverGroupSpec = serde_yaml::from_str(PLAYGROUND).expect("parse");
        let reader = spec.site("reader").expect("reader").clone();
        assert_eq!(spec.effective_read_only_max_lag_seconds(&reader), 30);
        spec.sites[2].read_only_max_lag_seconds = Some(0);
        let reader = spec.sites[2].clone();
        assert_eq!(spec.effective_read_only_max_lag_seconds(&reader), 0);
    }

    #[test]
    fn validation_names_the_field() {
        let mut spec: MysqlFailoverGroupSpec = serde_yaml::from_str(PLAYGROUND).expect("parse");
        spec.initial_active_site = "reader".into();
        spec.sites.push(spec.sites[0].clone());
        let problems = spec.validate().join("\n");
        assert!(problems.contains("spec.initialActiveSite"), "{problems}");
        assert!(
            problems.contains("spec.sites[3].name: duplicate"),
            "{problems}"
        );
    }

    /// docs/design/operator.md#returning-primary: `returningPrimary.onErrant` is `fence` (the
    /// default) or `rejoin`; anything else does not decode.
    #[test]
    fn returning_primary_on_errant_is_fence_or_rejoin() {
        let rejoin: MysqlFailoverGroupSpec = serde_yaml::from_str(&format!(
            "{PLAYGROUND}returningPrimary: {{onErrant: rejoin}}\n"
        ))
        .expect("parse");
        assert_eq!(rejoin.returning_primary.on_errant, OnErrant::Rejoin);
        assert!(rejoin.validate().is_empty());
        let unknown = serde_yaml::from_str::<MysqlFailoverGroupSpec>(&format!(
            "{PLAYGROUND}returningPrimary: {{onErrant: discard}}\n"
        ));
        assert!(unknown.is_err(), "{unknown:?}");
    }

    #[test]
    fn dns_ttl_defaults_to_60() {
        let dns: DnsSpec = serde_yaml::from_str("hostname: a.example").expect("parse");
        assert_eq!(dns.ttl, DEFAULT_DNS_TTL);
    }
}
