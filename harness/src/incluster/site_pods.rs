//! Where the site probes dial ([`crate::live::site_probes`]): the workload pod watches the
//! pods of its namespace through the Kubernetes API (in-cluster config, as its ServiceAccount
//! `bloodraven-workload`, whose Role allows `get`, `list` and `watch` of pods there and nothing
//! else: `fixtures/playground/workload.yaml`) and keeps each site's pod IP current. A site pod
//! is `mysql-<group>-<site>-0`, labelled `app.kubernetes.io/instance=<group>` and
//! `shipstream.io/site=<site>` (the operator's `site_labels`).
//!
//! A pod recreated gets a new IP, which replaces the old one as soon as the API shows it. Until
//! then, and while a pod is gone or has no IP, the last IP known stays: the process that had it
//! is either gone (connecting fails: the site is unreachable, which it is) or still running (a
//! pod deleted by force) and then it is exactly what must be watched.

use std::collections::BTreeMap;

use bloodraven_api::names;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};
use tokio::sync::watch;

use crate::live::site_probes::{SiteAddress, SiteAddresses};
use crate::scenario::model::Site;

/// The site and pod IP (if it has one yet) of a site pod of `group`: named
/// `mysql-<group>-<site>-0` and labelled with the group's instance and that site. `None` for
/// any other pod.
pub fn site_pod_ip(group: &str, pod: &Pod) -> Option<(Site, Option<String>)> {
    let labels = pod.metadata.labels.as_ref()?;
    if labels.get(names::LABEL_INSTANCE).map(String::as_str) != Some(group) {
        return None;
    }
    let site = Site::from_name(labels.get(names::LABEL_SITE)?)?;
    if pod.metadata.name.as_deref() != Some(names::pod(group, site.name()).as_str()) {
        return None;
    }
    let ip = pod
        .status
        .as_ref()
        .and_then(|status| status.pod_ip.clone())
        .filter(|ip| !ip.is_empty());
    Some((site, ip))
}

/// The label selector of a group's site pods.
pub fn site_pod_selector(group: &str) -> String {
    format!("{}={group},{}", names::LABEL_INSTANCE, names::LABEL_SITE)
}

/// The pod IPs of the watched sites, from a watch's events (pure).
#[derive(Debug, Clone)]
pub struct SitePodIps {
    group: String,
    sites: Vec<Site>,
    known: BTreeMap<Site, String>,
    listed: bool,
}

impl SitePodIps {
    /// Nothing known yet about `sites` of `group`.
    pub fn new(group: &str, sites: &[Site]) -> Self {
        Self {
            group: group.to_owned(),
            sites: sites.to_vec(),
            known: BTreeMap::new(),
            listed: false,
        }
    }

    /// Takes one watch event. A pod with a new IP replaces the site's address; a pod deleted
    /// or without an IP leaves the last one known.
    pub fn on_event(&mut self, event: Event<Pod>) {
        match event {
            Event::Init | Event::Delete(_) => {}
            Event::InitDone => self.listed = true,
            Event::InitApply(pod) | Event::Apply(pod) => {
                if let Some((site, Some(ip))) = site_pod_ip(&self.group, &pod) {
                    if self.sites.contains(&site) {
                        self.known.insert(site, ip);
                    }
                }
            }
        }
    }

    /// Every watched site's address now (`why` names what is missing when none is known).
    pub fn addresses(&self, why: Option<&str>) -> SiteAddresses {
        self.sites
            .iter()
            .map(|site| {
                let address = match self.known.get(site) {
                    Some(ip) => SiteAddress::Known(ip.clone()),
                    None => SiteAddress::Unknown(match (why, self.listed) {
                        (Some(why), _) => why.to_owned(),
                        (None, true) => format!(
                            "the API lists no pod {} with an IP",
                            names::pod(&self.group, site.name())
                        ),
                        (None, false) => {
                            "the first list of the site pods has not arrived".to_owned()
                        }
                    }),
                };
                (*site, address)
            })
            .collect()
    }
}

/// Watches the site pods of `group` in `namespace` (`None`: the client's default, the pod's
/// own) and publishes their addresses into `addresses` until `stopped` turns true. Without an
/// API client (no in-cluster config) every site stays unknown, with the reason; a broken watch
/// is retried with kube's backoff.
pub async fn watch_site_pods(
    group: String,
    namespace: Option<String>,
    sites: Vec<Site>,
    addresses: watch::Sender<SiteAddresses>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut ips = SitePodIps::new(&group, &sites);
    let client = match Client::try_default().await {
        Ok(client) => client,
        Err(error) => {
            let why = format!("failed to connect to the Kubernetes API: {error}");
            tracing::error!(?namespace, %group, %why, "the site probes have no pod IPs");
            addresses.send_replace(ips.addresses(Some(&why)));
            while !*stopped.borrow() {
                if stopped.changed().await.is_err() {
                    return;
                }
            }
            return;
        }
    };
    let namespace = namespace.unwrap_or_else(|| client.default_namespace().to_owned());
    tracing::info!(%namespace, %group, ?sites, "watching the site pods for the site probes");
    let api: Api<Pod> = Api::namespaced(client, &namespace);
    let config = watcher::Config::default().labels(&site_pod_selector(&group));
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    loop {
        tokio::select! {
            changed = stopped.changed() => {
                if changed.is_err() || *stopped.borrow() {
                    return;
                }
            }
            next = stream.next() => match next {
                Some(Ok(event)) => {
                    let before = ips.addresses(None);
                    ips.on_event(event);
                    let now = ips.addresses(None);
                    if now != before {
                        tracing::info!(%group, addresses = ?now, "site pod addresses");
                    }
                    addresses.send_replace(now);
                }
                Some(Err(error)) => {
                    tracing::warn!(%namespace, %group, error = %error, "watching the site pods failed; retrying");
                }
                None => return,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, group: &str, site: &str, ip: Option<&str>) -> Pod {
        serde_json::from_value(json!({
            "metadata": {
                "name": name,
                "labels": {"app.kubernetes.io/instance": group, "shipstream.io/site": site},
            },
            "status": {"podIP": ip},
        }))
        .expect("pod")
    }

    // harness/src/incluster/site_pods.rs: only the group's site pods count, by name and labels;
    // a pod recreated with a new IP replaces the address, and a pod gone or without an IP
    // leaves the last one known.
    #[test]
    fn site_pod_ips_follow_the_pods_and_keep_the_last_ip() {
        let group = "playground";
        assert_eq!(
            site_pod_ip(
                group,
                &pod("mysql-playground-iad-0", group, "iad", Some("10.0.0.5"))
            ),
            Some((Site::Iad, Some("10.0.0.5".to_owned())))
        );
        assert_eq!(
            site_pod_ip(group, &pod("backup-iad-x", group, "iad", Some("10.0.0.9"))),
            None,
            "not the site's pod"
        );
        assert_eq!(
            site_pod_ip(
                group,
                &pod("mysql-playground-iad-0", "other", "iad", Some("10.0.0.9"))
            ),
            None
        );
        let mut ips = SitePodIps::new(group, &[Site::Iad, Site::Pdx]);
        assert!(matches!(
            ips.addresses(None)[&Site::Iad],
            SiteAddress::Unknown(ref why) if why.contains("first list")
        ));
        ips.on_event(Event::Init);
        ips.on_event(Event::InitApply(pod(
            "mysql-playground-iad-0",
            group,
            "iad",
            Some("10.0.0.5"),
        )));
        ips.on_event(Event::InitDone);
        let now = ips.addresses(None);
        assert_eq!(now[&Site::Iad], SiteAddress::Known("10.0.0.5".to_owned()));
        assert!(matches!(
            now[&Site::Pdx],
            SiteAddress::Unknown(ref why) if why.contains("mysql-playground-pdx-0")
        ));
        let old = pod("mysql-playground-iad-0", group, "iad", Some("10.0.0.5"));
        ips.on_event(Event::Delete(old));
        ips.on_event(Event::Apply(pod(
            "mysql-playground-iad-0",
            group,
            "iad",
            None,
        )));
        assert_eq!(
            ips.addresses(None)[&Site::Iad],
            SiteAddress::Known("10.0.0.5".to_owned()),
            "kept until a new IP shows"
        );
        ips.on_event(Event::Apply(pod(
            "mysql-playground-iad-0",
            group,
            "iad",
            Some("10.0.0.7"),
        )));
        assert_eq!(
            ips.addresses(None)[&Site::Iad],
            SiteAddress::Known("10.0.0.7".to_owned())
        );
        assert_eq!(
            site_pod_selector(group),
            "app.kubernetes.io/instance=playground,shipstream.io/site"
        );
    }
}
