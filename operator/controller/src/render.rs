//! Action -> Kubernetes object rendering (pure): the Service and DNSEndpoint server-side
//! apply bodies, the pod label patch, the node taint list, the Event of a catalogued reason.

use std::collections::BTreeMap;

use bloodraven_api::{names, DNSEndpoint, DNSEndpointSpec, MysqlFailoverGroup};
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
/// ports and `publishNotReadyAddresses` core decided (seed 000), headless when asked.
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

/// The `action` field of an Event: what the operator was doing when it happened.
pub fn event_action(reason: EventReason) -> &'static str {
    match reason {
        EventReason::AuthorityIssued
        | EventReason::AuthorityValid
        | EventReason::AuthorityInvalid
        | EventReason::AuthorityAdopted
        | EventReason::PrimaryReasserted => "Authority",
        EventReason::SiteFailed | EventReason::SiteRecovered | EventReason::GtidUnreadable => {
            "Observe"
        }
        EventReason::EmergencyFailoverStarted
        | EventReason::EmergencyFailoverBlockedByCooldown
        | EventReason::NoFailoverCandidate
        | EventReason::AwaitingLeaseExpiry
        | EventReason::LeaseWaitSkipped
        | EventReason::OldPrimaryFenced
        | EventReason::Draining
        | EventReason::Promoted
        | EventReason::FailoverCompleted
        | EventReason::LostTransactionsExact => "Failover",
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
    }
}
