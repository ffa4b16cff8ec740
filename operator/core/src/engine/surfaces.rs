//! The surfaces a promotion moves (docs/design/requirements.md R000.1-R000.13): authority
//! validity, pod labels behind the four Service kinds, the Services themselves, and the
//! DNSEndpoint.

use std::collections::BTreeMap;

use bloodraven_api::{names, DNSEndpointSpec, SiteRole};
use bloodraven_mysql::{errant_transactions, same_host};

use super::action::{Action, DesiredService, EventReason, MetricObservation, ServiceKind};
use super::failover::{moving, source_host_of};
use super::memory::{AuthorityValidity, Detection, GroupMemory, InvalidReason, PodRole, SiteState};
use super::observation::DnsReading;
use super::plan::{Context, Plan};

/// Whether the active site is confirmed writable under the current authority this poll.
pub(super) fn check_active(
    context: &Context<'_>,
    memory: &GroupMemory,
) -> Result<(), InvalidReason> {
    if memory.topology_generation == 0 {
        return Err(InvalidReason::NotIssued);
    }
    let view = context.view(&memory.active_site);
    if !view.sidecar_up {
        return Err(InvalidReason::ActiveUnreachable);
    }
    if !view.mysql_up {
        return Err(InvalidReason::ActiveMysqlDown);
    }
    if view.read_only != Some(false) {
        return Err(InvalidReason::ActiveNotWritable);
    }
    if !view.lease_held {
        return Err(InvalidReason::ActiveLeaseNotHeld);
    }
    let names_current = view.authority.as_ref().is_some_and(|authority| {
        authority.active_site.as_deref() == Some(memory.active_site.as_str())
            && authority.topology_generation == memory.topology_generation
    });
    if !names_current {
        return Err(InvalidReason::ActiveAuthorityMismatch);
    }
    Ok(())
}

/// The authority validity after this poll's cross-site decisions.
///
/// A move in flight is `Invalid(Moving)`. An active site that merely did not answer this
/// poll (fewer failed polls than the threshold) keeps the previous validity: detection, not
/// one lost packet, decides that the primary is gone. Every other reading is confirmed.
pub(super) fn authority_validity(
    context: &Context<'_>,
    memory: &GroupMemory,
    previous: &AuthorityValidity,
) -> AuthorityValidity {
    if moving(memory) {
        return AuthorityValidity::Invalid(InvalidReason::Moving);
    }
    match check_active(context, memory) {
        Ok(()) => AuthorityValidity::Valid,
        Err(InvalidReason::ActiveUnreachable) => {
            let suspect = memory.site(&memory.active_site).is_some_and(|site| {
                site.detection == Detection::Suspect && site.state == SiteState::Active
            });
            if suspect && previous.is_valid() {
                AuthorityValidity::Valid
            } else {
                AuthorityValidity::Invalid(InvalidReason::ActiveUnreachable)
            }
        }
        Err(reason) => AuthorityValidity::Invalid(reason),
    }
}

/// Emits an event when the validity changes.
pub(super) fn report_validity(memory: &GroupMemory, previous: &AuthorityValidity, plan: &mut Plan) {
    if *previous == memory.authority {
        return;
    }
    match &memory.authority {
        AuthorityValidity::Valid => plan.event(
            EventReason::AuthorityValid,
            format!(
                "{} is confirmed writable at topology generation {}",
                memory.active_site, memory.topology_generation
            ),
        ),
        AuthorityValidity::Invalid(reason) => plan.event(
            EventReason::AuthorityInvalid,
            format!(
                "authority invalid ({}): every shared endpoint shed on purpose",
                reason.as_str()
            ),
        ),
    }
}

/// The five conjuncts of a healthy replica (docs/design/requirements.md R000.7).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct ReplicaConjuncts {
    /// Source convergence: no transaction the active site lacks.
    pub converged: bool,
    /// Both replication threads run.
    pub replicating: bool,
    /// `secondsBehindSource` is non-nil.
    pub lag_known: bool,
    /// The source host is canonically the active site's internal Service (direct, no chain).
    pub direct_source: bool,
    /// Lag within `EffectiveReadOnlyMaxLagSeconds` (nil inherits maxLagSeconds, 0 demands 0).
    pub lag_within_limit: bool,
}

impl ReplicaConjuncts {
    /// A read-only site: all five.
    pub fn reader_healthy(self) -> bool {
        self.converged
            && self.replicating
            && self.lag_known
            && self.direct_source
            && self.lag_within_limit
    }

    /// A read-write replica: replication running and source converged (direct from the
    /// active site, nothing it lacks).
    pub fn read_write_healthy(self) -> bool {
        self.converged && self.replicating && self.direct_source
    }
}

/// Evaluates the conjuncts of `site` against the active site.
pub(super) fn replica_conjuncts(
    context: &Context<'_>,
    memory: &GroupMemory,
    site: &str,
) -> ReplicaConjuncts {
    let view = context.view(site);
    let active = &memory.active_site;
    let active_gtid = context
        .view(active)
        .gtid
        .as_ref()
        .or_else(|| memory.site(active).and_then(|s| s.gtid_executed.as_ref()));
    let converged = view
        .gtid
        .as_ref()
        .zip(active_gtid)
        .is_some_and(|(gtid, active_gtid)| errant_transactions(gtid, active_gtid).is_empty());
    let replication = view.replication.as_ref();
    let lag = replication.and_then(|r| r.seconds_behind_source);
    let limit = context
        .spec
        .site(site)
        .map(|spec| context.spec.effective_read_only_max_lag_seconds(spec))
        .unwrap_or(context.spec.max_lag_seconds);
    let active_host = source_host_of(context, active);
    ReplicaConjuncts {
        converged: view.is_up() && converged,
        replicating: view.is_up() && view.replicating(),
        lag_known: lag.is_some(),
        direct_source: replication
            .and_then(|r| r.source_host.as_deref())
            .is_some_and(|host| same_host(host, &active_host, &context.observation.namespace)),
        lag_within_limit: lag.is_some_and(|lag| lag <= limit),
    }
}

/// Whether the replica `site` (of spec role `role`) is healthy, authority aside: its
/// conjuncts for its role hold and no restore withholds it awaiting its re-seed. The pod
/// labels and the ordered update's "healthy again" are this one judgement (simulator seed
/// 8103 with every fault mode: the update took a replica a failed restore still withheld,
/// labelled unhealthy, for healthy again and recreated the next site).
pub(super) fn replica_healthy(
    context: &Context<'_>,
    memory: &GroupMemory,
    site: &str,
    role: SiteRole,
) -> bool {
    if super::restore::withholds(memory, site) {
        return false;
    }
    let conjuncts = replica_conjuncts(context, memory, site);
    match role {
        SiteRole::ReadOnly => conjuncts.reader_healthy(),
        SiteRole::ReadWrite => conjuncts.read_write_healthy(),
    }
}

/// Pod labels for every site: `role=primary` only on the active site while the authority
/// is valid; `fenced` on demoted sites; `healthy=yes` only under a valid authority.
pub(super) fn labels(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    let valid = memory.authority.is_valid();
    let restoring = super::restore::holds_fenced(memory).map(str::to_owned);
    let decided: Vec<(String, PodRole, bool)> = context
        .spec
        .sites
        .iter()
        .filter_map(|spec| {
            let entry = memory.site(&spec.name)?;
            // A site a rejoin holds (archiving, re-seeding, or archived and not rejoined)
            // serves nowhere, whatever else memory says of it (`engine::rejoin`).
            let held = super::rejoin::holds_record(entry);
            let (role, healthy) = match entry.state {
                SiteState::Active | SiteState::Replica | SiteState::Demoted if held => {
                    (PodRole::Fenced, false)
                }
                // Restore in place (docs/design/requirements.md R000.9): the pod leaves both
                // shared Services at once.
                SiteState::Active if restoring.as_deref() == Some(spec.name.as_str()) => {
                    (PodRole::Fenced, false)
                }
                SiteState::Active if valid && spec.name == memory.active_site => {
                    (PodRole::Primary, true)
                }
                SiteState::Active => (PodRole::Replica, false),
                SiteState::Demoted => (PodRole::Fenced, false),
                SiteState::Replica => (
                    PodRole::Replica,
                    valid && replica_healthy(context, memory, &spec.name, spec.role),
                ),
            };
            Some((spec.name.clone(), role, healthy))
        })
        .collect();
    for (site, role, healthy) in decided {
        if let Some(entry) = memory.site_mut(&site) {
            entry.role = role;
            entry.healthy = healthy;
            if let Some(seconds) = entry.seconds_behind_source.filter(|_| entry.replicating) {
                plan.tail(Action::Metric(MetricObservation::ReplicationLag {
                    site: site.clone(),
                    seconds,
                }));
            }
        }
        plan.surface(Action::SetPodLabels {
            pod: names::pod(context.group(), &site),
            site,
            role,
            healthy,
        });
    }
}

/// The `2 × sites + 2` Services, every poll (selectors exactly as docs/design/requirements.md
/// R000.2-R000.5).
pub(super) fn services(context: &Context<'_>, plan: &mut Plan) {
    let group = context.group();
    let instance = (names::LABEL_INSTANCE.to_string(), group.to_string());
    let ports = vec![
        (names::PORT_NAME_MYSQL.to_string(), names::PORT_MYSQL),
        (names::PORT_NAME_SIDECAR.to_string(), names::PORT_SIDECAR),
    ];
    for site in context.site_names() {
        let selector: BTreeMap<String, String> = [
            instance.clone(),
            (names::LABEL_SITE.to_string(), site.to_string()),
        ]
        .into_iter()
        .collect();
        plan.surface(Action::ApplyService(DesiredService {
            name: names::site_service(group, site),
            kind: ServiceKind::SiteInternal,
            site: Some(site.to_string()),
            selector: selector.clone(),
            ports: ports.clone(),
            publish_not_ready_addresses: true,
            headless: false,
        }));
        plan.surface(Action::ApplyService(DesiredService {
            name: names::headless_service(group, site),
            kind: ServiceKind::SiteHeadless,
            site: Some(site.to_string()),
            selector,
            ports: ports.clone(),
            publish_not_ready_addresses: true,
            headless: true,
        }));
    }
    plan.surface(Action::ApplyService(DesiredService {
        name: names::primary_service(group),
        kind: ServiceKind::Primary,
        site: None,
        selector: [
            instance.clone(),
            (
                names::LABEL_ROLE.to_string(),
                names::ROLE_PRIMARY.to_string(),
            ),
        ]
        .into_iter()
        .collect(),
        ports: vec![(names::PORT_NAME_MYSQL.to_string(), names::PORT_MYSQL)],
        publish_not_ready_addresses: false,
        headless: false,
    }));
    plan.surface(Action::ApplyService(DesiredService {
        name: names::replicas_service(group),
        kind: ServiceKind::Replicas,
        site: None,
        selector: [
            instance,
            (
                names::LABEL_ROLE.to_string(),
                names::ROLE_REPLICA.to_string(),
            ),
            (
                names::LABEL_HEALTHY.to_string(),
                names::HEALTHY_YES.to_string(),
            ),
        ]
        .into_iter()
        .collect(),
        ports: vec![(names::PORT_NAME_MYSQL.to_string(), names::PORT_MYSQL)],
        publish_not_ready_addresses: false,
        headless: false,
    }));
}

/// The DNSEndpoint: re-derived from live topology every poll, applied only when the read-back
/// record differs, and only while the authority is valid, so it never publishes a target that
/// is not the confirmed active site. Nothing is memoised: a rejected apply heals on a later
/// poll (docs/design/requirements.md R000.12-R000.13).
pub(super) fn dns(context: &Context<'_>, memory: &GroupMemory, plan: &mut Plan) {
    let Some(dns) = &context.spec.dns else {
        return;
    };
    if !memory.authority.is_valid() {
        return;
    }
    let Some(target) = context.view(&memory.active_site).service_cluster_ip.clone() else {
        return;
    };
    let desired = DNSEndpointSpec::a_record(&dns.hostname, &target, dns.ttl);
    let matches = match &context.observation.dns {
        DnsReading::Present(live) => same_records(live, &desired),
        DnsReading::Absent | DnsReading::Unknown { .. } => false,
    };
    if !matches {
        plan.surface(Action::ApplyDnsEndpoint {
            name: names::dns_endpoint(context.group()),
            spec: desired,
        });
    }
}

/// Record equality ignoring provider labels (external-dns may add its own).
fn same_records(live: &DNSEndpointSpec, desired: &DNSEndpointSpec) -> bool {
    live.endpoints.len() == desired.endpoints.len()
        && live
            .endpoints
            .iter()
            .zip(&desired.endpoints)
            .all(|(live, desired)| {
                live.dns_name == desired.dns_name
                    && live.record_type == desired.record_type
                    && live.record_ttl == desired.record_ttl
                    && live.targets == desired.targets
            })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: ReplicaConjuncts = ReplicaConjuncts {
        converged: true,
        replicating: true,
        lag_known: true,
        direct_source: true,
        lag_within_limit: true,
    };

    #[test]
    fn seed_000_four_out_of_five_is_healthy_no() {
        assert!(ALL.reader_healthy());
        let each_missing = [
            ReplicaConjuncts {
                converged: false,
                ..ALL
            },
            ReplicaConjuncts {
                replicating: false,
                ..ALL
            },
            ReplicaConjuncts {
                lag_known: false,
                ..ALL
            },
            ReplicaConjuncts {
                direct_source: false,
                ..ALL
            },
            ReplicaConjuncts {
                lag_within_limit: false,
                ..ALL
            },
        ];
        for conjuncts in each_missing {
            assert!(!conjuncts.reader_healthy(), "{conjuncts:?}");
        }
    }

    #[test]
    fn read_write_replica_health_is_running_and_converged_from_the_active_site() {
        assert!(ReplicaConjuncts {
            lag_known: false,
            lag_within_limit: false,
            ..ALL
        }
        .read_write_healthy());
        assert!(!ReplicaConjuncts {
            replicating: false,
            ..ALL
        }
        .read_write_healthy());
        assert!(!ReplicaConjuncts {
            converged: false,
            ..ALL
        }
        .read_write_healthy());
        assert!(!ReplicaConjuncts {
            direct_source: false,
            ..ALL
        }
        .read_write_healthy());
    }

    #[test]
    fn seed_000_dns_comparison_ignores_provider_labels_only() {
        let desired = DNSEndpointSpec::a_record("db.example", "10.0.0.1", 10);
        let mut live = desired.clone();
        live.endpoints[0]
            .labels
            .insert("owner".to_string(), "external-dns".to_string());
        assert!(same_records(&live, &desired));
        let mut other_ttl = desired.clone();
        other_ttl.endpoints[0].record_ttl = Some(60);
        assert!(!same_records(&other_ttl, &desired));
        let mut two_targets = desired.clone();
        two_targets.endpoints[0]
            .targets
            .push("10.0.0.2".to_string());
        assert!(!same_records(&two_targets, &desired));
        assert!(!same_records(&DNSEndpointSpec::default(), &desired));
    }
}
