//! Gather: everything one poll reads, turned into core's [`Observation`].
//!
//! Read order (core's contract): every other site before the site memory names active, so a
//! replica's GTID set read first is a subset of the active site's read after it. Every error
//! is an unknown recorded in the observation, never a reason to skip the poll.

use bloodraven_api::{names, DNSEndpoint, MysqlFailoverGroup, Timestamp};
use bloodraven_core::deploy::HoldInfo;
use bloodraven_core::engine::{DnsReading, SidecarReading, SiteObservation};
use bloodraven_core::{GroupMemory, Observation};
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::{Api, Client};

use crate::deploy_api::store::LeaseStore;
use crate::memory::annotations_of;
use crate::sidecar::SidecarClient;

/// Name of the sidecar container in a site pod (its start time is the sidecar's uptime).
pub const SIDECAR_CONTAINER: &str = "sidecar";

/// Operation id reported when the deploy-lease state could not be read: planned disruption
/// is deferred by one poll rather than risk ignoring a live hold.
pub const UNREADABLE_HOLD: &str = "unreadable-deploy-lease-state";

/// What the cluster objects of one site say (pure input of [`site_observation`]).
#[derive(Clone, Debug, Default)]
pub struct SiteObjects {
    /// The site pod, if it exists.
    pub pod: Option<Pod>,
    /// The internal per-site Service, if it exists.
    pub service: Option<Service>,
}

/// One site's observation from its sidecar reading and objects at `now` (pure).
pub fn site_observation(
    site: &str,
    sidecar: SidecarReading,
    objects: &SiteObjects,
    now: Timestamp,
) -> SiteObservation {
    let node_name = objects
        .pod
        .as_ref()
        .and_then(|pod| pod.spec.as_ref())
        .and_then(|spec| spec.node_name.clone());
    let service_cluster_ip = objects
        .service
        .as_ref()
        .and_then(|service| service.spec.as_ref())
        .and_then(|spec| spec.cluster_ip.clone())
        .filter(|ip| !ip.is_empty() && ip != "None");
    let sidecar_uptime = objects
        .pod
        .as_ref()
        .and_then(|pod| pod.status.as_ref())
        .and_then(|status| status.container_statuses.as_ref())
        .and_then(|statuses| {
            statuses
                .iter()
                .find(|status| status.name == SIDECAR_CONTAINER)
        })
        .and_then(|status| status.state.as_ref())
        .and_then(|state| state.running.as_ref())
        .and_then(|running| running.started_at.as_ref())
        .map(|started| {
            let started = Timestamp::from_unix_millis(started.0.as_millisecond());
            now.saturating_duration_since(started)
        });
    SiteObservation {
        site: site.to_string(),
        sidecar,
        node_name,
        service_cluster_ip,
        sidecar_uptime,
    }
}

/// The DNSEndpoint reading from a get (pure).
pub fn dns_reading(result: Result<Option<DNSEndpoint>, kube::Error>) -> DnsReading {
    match result {
        Ok(None) => DnsReading::Absent,
        Ok(Some(endpoint)) => DnsReading::Present(endpoint.spec),
        Err(error) => DnsReading::Unknown {
            error: format!("get dnsendpoint: {error}"),
        },
    }
}

/// Reads one poll's observation of `group`.
pub async fn gather(
    client: &Client,
    sidecars: &SidecarClient,
    store: &LeaseStore,
    group: &MysqlFailoverGroup,
    memory: &GroupMemory,
    now_of: impl Fn() -> Timestamp,
) -> Observation {
    let namespace = group.metadata.namespace.clone().unwrap_or_default();
    let name = group.metadata.name.clone().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let services: Api<Service> = Api::namespaced(client.clone(), &namespace);

    let site_names: Vec<&str> = group
        .spec
        .sites
        .iter()
        .map(|site| site.name.as_str())
        .filter(|site| *site != memory.active_site)
        .collect();
    let others = futures::future::join_all(
        site_names
            .iter()
            .map(|site| read_site(&pods, &services, sidecars, &name, site, &namespace, &now_of)),
    )
    .await;
    let mut sites = others;
    if group.spec.site(&memory.active_site).is_some() {
        sites.push(
            read_site(
                &pods,
                &services,
                sidecars,
                &name,
                &memory.active_site,
                &namespace,
                &now_of,
            )
            .await,
        );
    }

    let dns_api: Api<DNSEndpoint> = Api::namespaced(client.clone(), &namespace);
    let dns = dns_reading(dns_api.get_opt(&names::dns_endpoint(&name)).await);

    let deploy_hold = match store.load(&namespace, &name).await {
        Ok(leases) => leases.live_hold(now_of()),
        Err(error) => {
            tracing::warn!(group = %name, namespace = %namespace, %error, "deploy lease state unreadable; deferring planned disruption this poll");
            Some(HoldInfo {
                earliest_expiry: now_of() + group.spec.poll_interval.get(),
                operation_id: UNREADABLE_HOLD.to_string(),
                instance: String::new(),
            })
        }
    };

    Observation {
        group: name,
        namespace,
        sites,
        annotations: annotations_of(group),
        deploy_hold,
        dns,
    }
}

async fn read_site(
    pods: &Api<Pod>,
    services: &Api<Service>,
    sidecars: &SidecarClient,
    group: &str,
    site: &str,
    namespace: &str,
    now_of: &impl Fn() -> Timestamp,
) -> SiteObservation {
    let pod_name = names::pod(group, site);
    let service_name = names::site_service(group, site);
    let (pod, service, reading) = tokio::join!(
        pods.get_opt(&pod_name),
        services.get_opt(&service_name),
        sidecars.status(group, site, namespace),
    );
    let objects = SiteObjects {
        pod: pod.unwrap_or_else(|error| {
            tracing::debug!(group, site, %error, "site pod unreadable");
            None
        }),
        service: service.unwrap_or_else(|error| {
            tracing::debug!(group, site, %error, "site service unreadable");
            None
        }),
    };
    site_observation(site, reading, &objects, now_of())
}
