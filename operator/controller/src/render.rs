//! Action -> Kubernetes object rendering (pure): the Service and DNSEndpoint server-side
//! apply bodies, the pod label patch, the node taint list, the Event of a catalogued reason.

use std::collections::BTreeMap;

use bloodraven_api::{names, DNSEndpoint, DNSEndpointSpec, MysqlFailoverGroup};
use bloodraven_core::deploy::Tombstone;
use bloodraven_core::engine::{DesiredService, EventReason, EventType, PodRole};
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource;
use serde_json::{json, Value};

/// Label put on every object the operator creates.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Value of [`LABEL_MANAGED_BY`].
pub const MANAGED_BY: &str = "bloodraven";
/// `spec.ipFamilyPolicy` of every Service (docs/design/requirements.md R004.10, R004.14): a
/// dual-stack Service answers both A and AAAA for every pod, so peer discovery by DNS would
/// count each sidecar twice towards its majority, and only one of the two addresses is the one
/// the pod advertises.
pub const IP_FAMILY_POLICY: &str = "SingleStack";
/// The one entry of `spec.ipFamilies` of every Service (docs/design/requirements.md R004.14).
pub const IP_FAMILY: &str = "IPv4";

/// The owner reference that ties an object to its group (garbage-collected with it).
pub fn owner_reference(group: &MysqlFailoverGroup) -> Option<OwnerReference> {
    group.controller_owner_ref(&())
}

fn managed_labels(group: &str) -> BTreeMap<String, String> {
    [
        (names::LABEL_INSTANCE.to_string(), group.to_string()),
        (LABEL_MANAGED_BY.to_string(), MANAGED_BY.to_string()),
    ]
    .into_iter()
    .collect()
}

/// The server-side apply body of one of the `2 × sites + 2` Services: exactly the selector,
/// ports and `publishNotReadyAddresses` core decided (docs/design/requirements.md
/// R000.2-R000.5), headless when asked, single stack IPv4 (docs/design/requirements.md
/// R004.14).
pub fn service(
    desired: &DesiredService,
    group: &str,
    namespace: &str,
    owner: Option<OwnerReference>,
) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(desired.name.clone()),
            namespace: Some(namespace.to_string()),
            labels: Some(managed_labels(group)),
            owner_references: owner.map(|owner| vec![owner]),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            selector: Some(desired.selector.clone()),
            ports: Some(
                desired
                    .ports
                    .iter()
                    .map(|(name, port)| ServicePort {
                        name: Some(name.clone()),
                        port: i32::from(*port),
                        target_port: Some(IntOrString::Int(i32::from(*port))),
                        protocol: Some("TCP".to_string()),
                        ..ServicePort::default()
                    })
                    .collect(),
            ),
            publish_not_ready_addresses: Some(desired.publish_not_ready_addresses),
            cluster_ip: desired.headless.then(|| "None".to_string()),
            type_: Some("ClusterIP".to_string()),
            ip_family_policy: Some(IP_FAMILY_POLICY.to_string()),
            ip_families: Some(vec![IP_FAMILY.to_string()]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// The server-side apply body of the group's DNSEndpoint (`externaldns.k8s.io/v1alpha1`).
pub fn dns_endpoint(
    name: &str,
    namespace: &str,
    group: &str,
    spec: &DNSEndpointSpec,
    owner: Option<OwnerReference>,
) -> DNSEndpoint {
    let mut endpoint = DNSEndpoint::new(name, spec.clone());
    endpoint.metadata.namespace = Some(namespace.to_string());
    endpoint.metadata.labels = Some(managed_labels(group));
    endpoint.metadata.owner_references = owner.map(|owner| vec![owner]);
    endpoint
}

/// JSON of an object for a server-side apply (with apiVersion and kind).
pub fn apply_body<K: Resource<DynamicType = ()> + serde::Serialize>(object: &K) -> Value {
    let mut value = serde_json::to_value(object).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.insert(
            "apiVersion".into(),
            Value::from(K::api_version(&()).to_string()),
        );
        map.insert("kind".into(), Value::from(K::kind(&()).to_string()));
    }
    value
}

/// The merge patch stamping `shipstream.io/role` and `shipstream.io/healthy` on a site pod.
pub fn pod_labels_patch(role: PodRole, healthy: bool) -> Value {
    json!({
        "metadata": {
            "labels": {
                names::LABEL_ROLE: role.as_str(),
                names::LABEL_HEALTHY: if healthy { names::HEALTHY_YES } else { names::HEALTHY_NO },
            }
        }
    })
}

/// The demotion taint of `group`: `bloodraven.shipstream.io/demoted=<group>:NoExecute`.
pub fn demotion_taint(group: &str) -> Taint {
    Taint {
        key: names::TAINT_DEMOTED.to_string(),
        value: Some(group.to_string()),
        effect: names::TAINT_EFFECT.to_string(),
        time_added: None,
    }
}

fn is_demotion_of(taint: &Taint, group: &str) -> bool {
    taint.key == names::TAINT_DEMOTED
        && taint.effect == names::TAINT_EFFECT
        && taint.value.as_deref() == Some(group)
}

/// The node's taints with this group's demotion taint added, or `None` when it is already
/// there (nothing to write). Other taints are kept untouched.
pub fn taints_with_demotion(existing: &[Taint], group: &str) -> Option<Vec<Taint>> {
    if existing.iter().any(|taint| is_demotion_of(taint, group)) {
        return None;
    }
    let mut taints = existing.to_vec();
    taints.push(demotion_taint(group));
    Some(taints)
}

/// The node's taints without this group's demotion taint, or `None` when it is absent.
pub fn taints_without_demotion(existing: &[Taint], group: &str) -> Option<Vec<Taint>> {
    if !existing.iter().any(|taint| is_demotion_of(taint, group)) {
        return None;
    }
    Some(
        existing
            .iter()
            .filter(|taint| !is_demotion_of(taint, group))
            .cloned()
            .collect(),
    )
}

/// The node patch writing `taints`, guarded by the `resourceVersion` the list was read at
/// (a concurrent taint change answers 409 and the next poll retries from a fresh read).
pub fn taints_patch(taints: &[Taint], resource_version: Option<&str>) -> Value {
    let mut patch = json!({ "spec": { "taints": taints } });
    if let Some(version) = resource_version {
        patch["metadata"] = json!({ "resourceVersion": version });
    }
    patch
}

/// A group annotation merge patch (`None` removes the annotation).
pub fn annotation_patch(key: &str, value: Option<&str>) -> Value {
    json!({ "metadata": { "annotations": { key: value } } })
}

/// The Kubernetes Event of a catalogued reason: `(type, reason, action)`.
pub fn event_fields(
    reason: EventReason,
) -> (kube::runtime::events::EventType, &'static str, &'static str) {
    let event_type = match reason.event_type() {
        EventType::Normal => kube::runtime::events::EventType::Normal,
        EventType::Warning => kube::runtime::events::EventType::Warning,
    };
    (event_type, reason.as_str(), event_action(reason))
}

/// The `DeploymentLeaseRevoked` Event of one revocation (docs/design/requirements.md R003.20):
/// one Event on the group naming every lease revoked (kind, operationId, instance, reason);
/// `None` when nothing was revoked (a revocation that found no live lease raises nothing).
pub fn leases_revoked_event(revoked: &[Tombstone]) -> Option<kube::runtime::events::Event> {
    if revoked.is_empty() {
        return None;
    }
    let leases: Vec<String> = revoked
        .iter()
        .map(|tombstone| {
            format!(
                "{} {} of {} ({})",
                tombstone.kind, tombstone.operation_id, tombstone.instance, tombstone.reason
            )
        })
        .collect();
    let (type_, reason, action) = event_fields(EventReason::DeploymentLeaseRevoked);
    Some(kube::runtime::events::Event {
        type_,
        reason: reason.to_string(),
        note: Some(format!("deployment leases revoked: {}", leases.join(", "))),
        action: action.to_string(),
        secondary: None,
    })
}

/// The `action` field of an Event: what the operator was doing when it happened.
pub fn event_action(reason: EventReason) -> &'static str {
    match reason {
        EventReason::AuthorityIssued
        | EventReason::AuthorityValid
        | EventReason::AuthorityInvalid
        | EventReason::AuthorityAdopted
        | EventReason::PrimaryReasserted
        | EventReason::AuthorityWithheld
        | EventReason::AuthorityRecovered => "Authority",
        EventReason::SiteFailed
        | EventReason::SiteRecovered
        | EventReason::GtidUnreadable
        | EventReason::AnnotationUnreadable
        | EventReason::AnnotationUnverified => "Observe",
        EventReason::EmergencyFailoverStarted
        | EventReason::EmergencyFailoverBlockedByCooldown
        | EventReason::NoFailoverCandidate
        | EventReason::AwaitingLeaseExpiry
        | EventReason::LeaseWaitSkipped
        | EventReason::OldPrimaryFenced
        | EventReason::CatchingUp
        | EventReason::Draining
        | EventReason::Promoted
        | EventReason::FailoverCompleted
        | EventReason::LostTransactionsExact
        | EventReason::LeaseTermsDiffer
        | EventReason::AgentlessPrimaryKilled
        | EventReason::AgentlessPrimaryNotKilled => "Failover",
        EventReason::ReturningPrimaryFenced
        | EventReason::ReturningPrimaryRejoined
        | EventReason::Repointed => "Replication",
        EventReason::PlannedFailoverAdmitting
        | EventReason::PlannedFailoverDeferred
        | EventReason::PlannedFailoverRejected
        | EventReason::PlannedFailoverDraining
        | EventReason::PlannedFailoverPromoting
        | EventReason::PlannedFailoverCompleted
        | EventReason::PlannedFailoverAborted => "PlannedFailover",
        EventReason::DeploymentLeaseRevoked => "DeployLeases",
        EventReason::SpecInvalid => "Validate",
        EventReason::BackupStarted | EventReason::BackupCompleted | EventReason::BackupFailed => {
            "Backup"
        }
        EventReason::RestoreAdmitting
        | EventReason::RestoreDeferred
        | EventReason::RestoreFencing
        | EventReason::RestoreRestoring
        | EventReason::RestorePromoted
        | EventReason::RestoreReseeding
        | EventReason::RestoreCompleted
        | EventReason::RestoreFailed => "Restore",
        EventReason::OrderedUpdateStarted
        | EventReason::OrderedUpdateDeferred
        | EventReason::OrderedUpdateRollingSite
        | EventReason::OrderedUpdateSiteUpdated
        | EventReason::OrderedUpdateFailingOver
        | EventReason::OrderedUpdateCompleted
        | EventReason::OrderedUpdateFailed => "OrderedUpdate",
        EventReason::RejoinRequested
        | EventReason::RejoinDeferred
        | EventReason::RejoinRefused
        | EventReason::RejoinArchiving
        | EventReason::RejoinArchived
        | EventReason::RejoinCompleted
        | EventReason::RejoinFailed => "Rejoin",
    }
}

#[cfg(test)]
mod tests {
    use bloodraven_api::MysqlFailoverGroupSpec;
    use bloodraven_core::engine::{
        DnsReading, GroupAnnotations, PodReading, SidecarReading, SiteObservation,
    };
    use bloodraven_core::{decide, Action, GroupMemory, Observation};

    use super::*;

    fn spec() -> MysqlFailoverGroupSpec {
        serde_yaml::from_str(
            "image: mariadb:10.11\nsites:\n- {name: iad, role: read-write}\n- {name: pdx, role: read-write}\n- {name: reader, role: read-only}\ninitialActiveSite: iad\ndns: {hostname: playground-db.example.local, ttl: 10}\n",
        )
        .expect("spec")
    }

    /// The Services core decides on a poll of the playground, rendered as apply bodies.
    fn rendered_services() -> Vec<Service> {
        let spec = spec();
        let observation = Observation {
            group: "playground".into(),
            namespace: "bloodraven-playground".into(),
            sites: spec
                .sites
                .iter()
                .map(|site| SiteObservation {
                    site: site.name.clone(),
                    sidecar: SidecarReading::Unreachable {
                        error: "not started".into(),
                    },
                    node_name: None,
                    service_cluster_ip: None,
                    sidecar_uptime: None,
                    pod_lease_terms: None,
                    pod: PodReading::Unknown,
                })
                .collect(),
            annotations: GroupAnnotations::default(),
            deploy_hold: None,
            dns: DnsReading::Absent,
            polled_at: None,
        };
        let decision = decide(
            &spec,
            &GroupMemory::initial(&spec),
            &observation,
            bloodraven_api::Timestamp::from_unix_millis(0),
        );
        decision
            .actions
            .iter()
            .filter_map(|action| match action {
                Action::ApplyService(desired) => Some(service(
                    desired,
                    "playground",
                    "bloodraven-playground",
                    None,
                )),
                _ => None,
            })
            .collect()
    }

    fn find<'a>(services: &'a [Service], name: &str) -> &'a ServiceSpec {
        services
            .iter()
            .find(|service| service.metadata.name.as_deref() == Some(name))
            .and_then(|service| service.spec.as_ref())
            .unwrap_or_else(|| panic!("service {name} not rendered"))
    }

    fn selector(spec: &ServiceSpec) -> Vec<(String, String)> {
        spec.selector
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect()
    }

    /// docs/design/requirements.md R000.2-R000.5: 2 × len(sites) + 2 Services; -primary selects
    /// exactly 2 labels and is not publishNotReady; -replicas exactly 3; per-site Services
    /// publish not-ready addresses.
    #[test]
    fn seed_000_service_selectors_are_exact() {
        let services = rendered_services();
        assert_eq!(services.len(), 2 * 3 + 2);

        let primary = find(&services, "mysql-playground-primary");
        assert_eq!(
            selector(primary),
            vec![
                ("app.kubernetes.io/instance".into(), "playground".into()),
                ("shipstream.io/role".into(), "primary".into()),
            ]
        );
        assert_eq!(primary.publish_not_ready_addresses, Some(false));

        let replicas = find(&services, "mysql-playground-replicas");
        assert_eq!(
            selector(replicas),
            vec![
                ("app.kubernetes.io/instance".into(), "playground".into()),
                ("shipstream.io/healthy".into(), "yes".into()),
                ("shipstream.io/role".into(), "replica".into()),
            ]
        );
        assert_eq!(replicas.publish_not_ready_addresses, Some(false));

        for site in ["iad", "pdx", "reader"] {
            let internal = find(&services, &format!("mysql-playground-{site}"));
            assert_eq!(internal.publish_not_ready_addresses, Some(true));
            assert_eq!(internal.cluster_ip, None);
            assert_eq!(
                selector(internal),
                vec![
                    ("app.kubernetes.io/instance".into(), "playground".into()),
                    ("shipstream.io/site".into(), site.into()),
                ]
            );
            let ports: Vec<(Option<String>, i32)> = internal
                .ports
                .iter()
                .flatten()
                .map(|port| (port.name.clone(), port.port))
                .collect();
            assert_eq!(
                ports,
                vec![(Some("mysql".into()), 3306), (Some("sidecar".into()), 8086)]
            );
            let headless = find(&services, &format!("mysql-playground-{site}-hl"));
            assert_eq!(headless.cluster_ip.as_deref(), Some("None"));
        }
    }

    /// docs/design/requirements.md R004.10, R004.14: every Service is single stack IPv4
    /// (`ipFamilyPolicy: SingleStack`, `ipFamilies: [IPv4]`), so DNS answers one address per
    /// pod and discovery counts each sidecar once.
    #[test]
    fn seed_004_every_service_is_single_stack_ipv4() {
        let services = rendered_services();
        assert_eq!(services.len(), 2 * 3 + 2);
        for service in &services {
            let body = apply_body(service);
            assert_eq!(
                (&body["spec"]["ipFamilyPolicy"], &body["spec"]["ipFamilies"]),
                (&json!("SingleStack"), &json!(["IPv4"])),
                "{}",
                body["metadata"]["name"]
            );
        }
    }

    /// docs/design/requirements.md R000.11-R000.12: the DNSEndpoint is one server-side apply of
    /// an A record with recordTTL from spec.dns.ttl, on externaldns.k8s.io/v1alpha1, named
    /// bloodraven-<group>.
    #[test]
    fn seed_000_dns_endpoint_apply_body() {
        let spec = DNSEndpointSpec::a_record("playground-db.example.local", "10.96.100.20", 10);
        let body = apply_body(&dns_endpoint(
            "bloodraven-playground",
            "bloodraven-playground",
            "playground",
            &spec,
            None,
        ));
        assert_eq!(body["apiVersion"], "externaldns.k8s.io/v1alpha1");
        assert_eq!(body["kind"], "DNSEndpoint");
        assert_eq!(body["metadata"]["name"], "bloodraven-playground");
        assert_eq!(body["metadata"]["namespace"], "bloodraven-playground");
        assert_eq!(
            body["spec"],
            json!({"endpoints": [{"dnsName": "playground-db.example.local", "recordType": "A", "recordTTL": 10, "targets": ["10.96.100.20"]}]})
        );
        assert!(body.get("status").is_none_or(Value::is_null), "{body}");
    }

    /// docs/design/requirements.md R000.17-R000.18: the NoExecute taint
    /// `bloodraven.shipstream.io/demoted=<group>`; adding it keeps every other taint and is
    /// idempotent; removal takes only ours.
    #[test]
    fn seed_000_demotion_taint_patch() {
        let other = Taint {
            key: "node.kubernetes.io/unreachable".into(),
            value: None,
            effect: "NoExecute".into(),
            time_added: None,
        };
        let other_group = demotion_taint("billing");
        let existing = vec![other.clone(), other_group.clone()];
        let added = taints_with_demotion(&existing, "playground").expect("added");
        assert_eq!(
            added,
            vec![
                other.clone(),
                other_group.clone(),
                demotion_taint("playground")
            ]
        );
        assert_eq!(taints_with_demotion(&added, "playground"), None);
        let patch = taints_patch(&added, Some("42"));
        assert_eq!(patch["metadata"]["resourceVersion"], "42");
        assert_eq!(
            patch["spec"]["taints"][2],
            json!({"key": "bloodraven.shipstream.io/demoted", "value": "playground", "effect": "NoExecute"})
        );
        assert_eq!(
            taints_without_demotion(&added, "playground"),
            Some(existing.clone())
        );
        assert_eq!(taints_without_demotion(&existing, "playground"), None);
    }

    /// docs/design/architecture.md#names: role and healthy pod labels.
    #[test]
    fn pod_label_patch_sets_role_and_healthy() {
        assert_eq!(
            pod_labels_patch(PodRole::Fenced, false),
            json!({"metadata": {"labels": {"shipstream.io/role": "fenced", "shipstream.io/healthy": "no"}}})
        );
        assert_eq!(
            pod_labels_patch(PodRole::Primary, true)["metadata"]["labels"]["shipstream.io/healthy"],
            "yes"
        );
        assert_eq!(
            annotation_patch("bloodraven.shipstream.io/planned-failover", None),
            json!({"metadata": {"annotations": {"bloodraven.shipstream.io/planned-failover": null}}})
        );
    }

    /// docs/design/requirements.md R003.20: the revocation event is named
    /// DeploymentLeaseRevoked in the catalogue.
    #[test]
    fn event_catalogue_keeps_core_reasons_and_types() {
        let (event_type, reason, action) = event_fields(EventReason::DeploymentLeaseRevoked);
        assert_eq!((reason, action), ("DeploymentLeaseRevoked", "DeployLeases"));
        assert!(matches!(
            event_type,
            kube::runtime::events::EventType::Normal
        ));
        let (event_type, reason, _) = event_fields(EventReason::SiteFailed);
        assert_eq!(reason, "SiteFailed");
        assert!(matches!(
            event_type,
            kube::runtime::events::EventType::Warning
        ));
    }

    /// docs/design/requirements.md R003.20: a revocation raises one DeploymentLeaseRevoked
    /// Event naming each revoked lease's kind, operationId, instance and reason; revoking
    /// nothing raises nothing.
    #[test]
    fn seed_003_revocation_event_names_every_revoked_lease() {
        use bloodraven_core::deploy::{LeaseKind, LeaseToken, RevokeReason};
        let tombstone = |kind, operation_id: &str| Tombstone {
            operation_id: operation_id.into(),
            kind,
            instance: "counter-app".into(),
            token_hash: LeaseToken::new("t").hash(),
            reason: RevokeReason::TopologyChanged,
            topology_generation: 18,
            revoked_at: bloodraven_api::Timestamp::from_unix_millis(1_000),
        };
        assert!(leases_revoked_event(&[]).is_none());
        let event = leases_revoked_event(&[
            tombstone(LeaseKind::Migration, "a1c3f0e2"),
            tombstone(LeaseKind::FailoverHold, "a1c3f0e2"),
        ])
        .expect("an event");
        assert_eq!(
            (event.reason.as_str(), event.action.as_str()),
            ("DeploymentLeaseRevoked", "DeployLeases")
        );
        assert_eq!(
            event.note.as_deref(),
            Some(
                "deployment leases revoked: migration a1c3f0e2 of counter-app (TopologyChanged), \
                 failover-hold a1c3f0e2 of counter-app (TopologyChanged)"
            )
        );
    }
}
