//! Reading the playground's topology from the API: which site a pod, a ClusterIP or a MySQL
//! hostname belongs to, and the ready endpoints of a Service as sites.

use std::collections::BTreeMap;

use bloodraven_api::names;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams};
use kube::Client;

use crate::error::{Error, Result};
use crate::playground::names::{GROUP, NAMESPACE};
use crate::scenario::model::Site;

fn cluster_error(action: impl Into<String>, reason: impl ToString) -> Error {
    Error::Cluster {
        action: action.into(),
        reason: reason.to_string(),
    }
}

/// The site of a MySQL `@@hostname` (the pod name `mysql-playground-<site>-0`).
pub fn site_of_hostname(hostname: &str) -> Option<Site> {
    Site::ALL
        .into_iter()
        .find(|site| hostname == names::pod(GROUP, site.name()))
}

/// The ClusterIP of every site's internal Service.
pub async fn site_cluster_ips(client: &Client) -> Result<BTreeMap<String, Site>> {
    let services: Api<Service> = Api::namespaced(client.clone(), NAMESPACE);
    let mut out = BTreeMap::new();
    for site in Site::ALL {
        let name = names::site_service(GROUP, site.name());
        if let Some(service) = services
            .get_opt(&name)
            .await
            .map_err(|e| cluster_error(format!("read Service {name}"), e))?
        {
            if let Some(ip) = service.spec.and_then(|spec| spec.cluster_ip) {
                out.insert(ip, site);
            }
        }
    }
    Ok(out)
}

/// The ClusterIP of a Service of the playground (`None` when absent or headless).
pub async fn cluster_ip(client: &Client, service: &str) -> Result<Option<String>> {
    let services: Api<Service> = Api::namespaced(client.clone(), NAMESPACE);
    Ok(services
        .get_opt(service)
        .await
        .map_err(|e| cluster_error(format!("read Service {service}"), e))?
        .and_then(|s| s.spec.and_then(|spec| spec.cluster_ip))
        .filter(|ip| ip != "None" && !ip.is_empty()))
}

/// The Service name of an `endpoints` expectation: `primary`, `replicas` or a site.
pub fn service_name(service: &str) -> String {
    match service {
        "primary" => names::primary_service(GROUP),
        "replicas" => names::replicas_service(GROUP),
        site => names::site_service(GROUP, site),
    }
}

/// The in-cluster stand-in for external-dns's Service (`fixtures/playground/dns-standin.yaml`).
pub const DNS_STANDIN_SERVICE: &str = "bloodraven-dns-standin";

/// Where the DNS answers external-dns publishes are asked: the stand-in's ClusterIP, port 53.
pub async fn dns_standin_server(client: &Client) -> Result<String> {
    let ip = cluster_ip(client, DNS_STANDIN_SERVICE)
        .await?
        .ok_or_else(|| {
            cluster_error(
                "find the external-dns stand-in",
                format!("Service {NAMESPACE}/{DNS_STANDIN_SERVICE} has no ClusterIP"),
            )
        })?;
    Ok(format!("{ip}:53"))
}

/// The in-cluster DNS name of the playground group's Service `service` (`primary`,
/// `replicas` or a site): what a pod of the cluster dials.
pub fn service_host(service: &str) -> String {
    format!(
        "{}.{}.svc.cluster.local",
        service_name(service),
        crate::playground::names::NAMESPACE
    )
}

/// The sites behind a Service's ready endpoints (EndpointSlices), sorted.
pub async fn endpoint_sites(client: &Client, service: &str) -> Result<Vec<Site>> {
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), NAMESPACE);
    let name = service_name(service);
    let list = slices
        .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={name}")))
        .await
        .map_err(|e| cluster_error(format!("list EndpointSlices of {name}"), e))?;
    let mut sites = Vec::new();
    for slice in list {
        for endpoint in slice.endpoints {
            let ready = endpoint
                .conditions
                .as_ref()
                .and_then(|c| c.ready)
                .unwrap_or(true);
            if !ready {
                continue;
            }
            let pod = endpoint.target_ref.and_then(|r| r.name).unwrap_or_default();
            if let Some(site) = site_of_hostname(&pod) {
                if !sites.contains(&site) {
                    sites.push(site);
                }
            }
        }
    }
    sites.sort();
    Ok(sites)
}

/// The pod of a site.
pub async fn site_pod(client: &Client, site: Site) -> Result<Option<Pod>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    pods.get_opt(&names::pod(GROUP, site.name()))
        .await
        .map_err(|e| cluster_error(format!("read the pod of {}", site.name()), e))
}

/// The pod IP of a site's pod.
pub async fn site_pod_ip(client: &Client, site: Site) -> Result<Option<String>> {
    Ok(site_pod(client, site)
        .await?
        .and_then(|pod| pod.status.and_then(|s| s.pod_ip)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostnames_map_to_sites() {
        assert_eq!(site_of_hostname("mysql-playground-pdx-0"), Some(Site::Pdx));
        assert_eq!(site_of_hostname("mysql-playground-pdx-1"), None);
        assert_eq!(site_of_hostname("counter-abc"), None);
        assert_eq!(service_name("primary"), "mysql-playground-primary");
        assert_eq!(service_name("iad"), "mysql-playground-iad");
    }
}
