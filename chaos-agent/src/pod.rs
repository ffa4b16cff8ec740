//! Finding a target: the namespace guard, the pod as read from the API (a [`Locator`]), and
//! the pure choice of the container id (or the pod uid, for a partition) from it. What the
//! faults need next, pids and a network namespace, comes from `/proc` ([`crate::procfs`]).

use std::future::Future;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use crate::cgroup::ContainerId;
use crate::error::{Error, Result};

/// Refuses a namespace outside `allowed` (the agent's `--namespaces`).
pub fn check_namespace(namespace: &str, allowed: &[String]) -> Result<()> {
    if allowed.iter().any(|a| a == namespace) {
        return Ok(());
    }
    Err(Error::NamespaceRefused {
        namespace: namespace.to_owned(),
        allowed: if allowed.is_empty() {
            "none".to_owned()
        } else {
            allowed.join(", ")
        },
    })
}

/// A container of a pod, as its status shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerView {
    /// Its name.
    pub name: String,
    /// `status.containerStatuses[].containerID` (`containerd://<id>`), once started.
    pub container_id: Option<String>,
    /// The kubelet will not run it again in this pod sandbox: an init container that
    /// completed (exit code 0, not a restartable sidecar), or an ephemeral container that
    /// terminated. A keepDown does not wait for such a container to be up (see
    /// [`crate::faults::kill::restart`]).
    pub finished: bool,
}

/// What the agent needs of a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodView {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid (the `pod<uid>` of its cgroups).
    pub uid: String,
    /// `spec.nodeName`.
    pub node_name: Option<String>,
    /// `spec.hostNetwork`.
    pub host_network: bool,
    /// Its containers, init containers and ephemeral containers with a status (an ephemeral
    /// container in the spec without one yet: listed, without an id).
    pub containers: Vec<ContainerView>,
    /// Its addresses (`status.podIPs`, else `status.podIP`); none before it has a sandbox.
    pub ips: Vec<String>,
}

impl PodView {
    /// The view of a Pod object.
    pub fn from_pod(pod: &Pod) -> PodView {
        let status = pod.status.as_ref();
        let spec = pod.spec.as_ref();
        let view = |c: &ContainerStatus, finished: bool| ContainerView {
            name: c.name.clone(),
            container_id: c.container_id.clone().filter(|id| !id.is_empty()),
            finished,
        };
        let terminated_with = |c: &ContainerStatus| {
            c.state
                .as_ref()
                .and_then(|state| state.terminated.as_ref())
                .map(|terminated| terminated.exit_code)
        };
        // A restartable init container (a native sidecar) is run again whatever its exit.
        let restartable = |name: &str| {
            spec.and_then(|s| s.init_containers.as_ref())
                .into_iter()
                .flatten()
                .any(|c| c.name == name && c.restart_policy.as_deref() == Some("Always"))
        };
        let mut containers: Vec<ContainerView> = status
            .and_then(|s| s.container_statuses.as_ref())
            .into_iter()
            .flatten()
            .map(|c| view(c, false))
            .collect();
        containers.extend(
            status
                .and_then(|s| s.init_container_statuses.as_ref())
                .into_iter()
                .flatten()
                .map(|c| view(c, terminated_with(c) == Some(0) && !restartable(&c.name))),
        );
        containers.extend(
            status
                .and_then(|s| s.ephemeral_container_statuses.as_ref())
                .into_iter()
                .flatten()
                .map(|c| view(c, terminated_with(c).is_some())),
        );
        for ephemeral in spec
            .and_then(|s| s.ephemeral_containers.as_ref())
            .into_iter()
            .flatten()
        {
            if !containers.iter().any(|c| c.name == ephemeral.name) {
                containers.push(ContainerView {
                    name: ephemeral.name.clone(),
                    container_id: None,
                    finished: false,
                });
            }
        }
        let mut ips: Vec<String> = status
            .and_then(|s| s.pod_ips.as_ref())
            .into_iter()
            .flatten()
            .map(|ip| ip.ip.clone())
            .filter(|ip| !ip.is_empty())
            .collect();
        if ips.is_empty() {
            ips.extend(
                status
                    .and_then(|s| s.pod_ip.clone())
                    .filter(|ip| !ip.is_empty()),
            );
        }
        PodView {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            node_name: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            host_network: pod
                .spec
                .as_ref()
                .and_then(|s| s.host_network)
                .unwrap_or(false),
            containers,
            ips,
        }
    }

    /// Its addresses, as partition peers (none while it has no IP).
    pub fn addresses(&self) -> Result<Vec<crate::faults::partition::Peer>> {
        self.ips
            .iter()
            .map(|ip| {
                let peer = crate::faults::partition::Peer::parse(ip).map_err(|error| {
                    Error::PodLookup {
                        namespace: self.namespace.clone(),
                        pod: self.name.clone(),
                        reason: format!("its status lists the pod IP {ip:?}: {error}"),
                    }
                })?;
                // A pod IP is one address; a network here would cut far more than the pod.
                if !peer.is_host() {
                    return Err(Error::PodLookup {
                        namespace: self.namespace.clone(),
                        pod: self.name.clone(),
                        reason: format!(
                            "its status lists the pod IP {ip:?}, a network, not an address"
                        ),
                    });
                }
                Ok(peer)
            })
            .collect()
    }

    fn check_node(&self, agent_node: Option<&str>) -> Result<()> {
        let Some(agent_node) = agent_node else {
            return Ok(());
        };
        let pod_node = self.node_name.clone().unwrap_or_default();
        if pod_node == agent_node {
            return Ok(());
        }
        Err(Error::WrongNode {
            namespace: self.namespace.clone(),
            pod: self.name.clone(),
            pod_node,
            agent_node: agent_node.to_owned(),
        })
    }

    /// The id of `container`, on this agent's node.
    pub fn container_target(
        &self,
        container: &str,
        agent_node: Option<&str>,
    ) -> Result<ContainerId> {
        self.check_node(agent_node)?;
        let fail = |reason: String| Error::Container {
            namespace: self.namespace.clone(),
            pod: self.name.clone(),
            container: container.to_owned(),
            reason,
        };
        let Some(view) = self.containers.iter().find(|c| c.name == container) else {
            let names: Vec<&str> = self.containers.iter().map(|c| c.name.as_str()).collect();
            return Err(fail(format!(
                "the pod's status lists no such container (it lists: {})",
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            )));
        };
        let raw = view
            .container_id
            .as_deref()
            .ok_or_else(|| fail("its status has no containerID yet (not started)".to_owned()))?;
        ContainerId::parse(raw)
    }

    /// The pod uid and every container id, for a partition: on this node, not on the host's
    /// network.
    pub fn network_target(&self, agent_node: Option<&str>) -> Result<(String, Vec<ContainerId>)> {
        self.check_node(agent_node)?;
        if self.host_network {
            return Err(Error::PodLookup {
                namespace: self.namespace.clone(),
                pod: self.name.clone(),
                reason: "refused: the pod uses the node's network (hostNetwork): a partition would cut off the node".to_owned(),
            });
        }
        crate::cgroup::check_id(&self.uid).map_err(|reason| Error::PodLookup {
            namespace: self.namespace.clone(),
            pod: self.name.clone(),
            reason: format!("its uid is unusable: {reason}"),
        })?;
        let ids = self
            .containers
            .iter()
            .filter_map(|c| c.container_id.as_deref())
            .map(ContainerId::parse)
            .collect::<Result<Vec<_>>>()?;
        Ok((self.uid.clone(), ids))
    }
}

/// How the agent reads a pod (the API in production, a fixed view in tests).
pub trait Locator: Send + Sync + 'static {
    /// The pod `namespace/name`.
    fn pod(&self, namespace: &str, name: &str) -> impl Future<Output = Result<PodView>> + Send;

    /// The pods of `namespace` scheduled on `node` (a stop-node's). A locator that cannot
    /// list refuses.
    fn pods_on_node(
        &self,
        namespace: &str,
        node: &str,
    ) -> impl Future<Output = Result<Vec<PodView>>> + Send {
        let (namespace, node) = (namespace.to_owned(), node.to_owned());
        async move {
            Err(Error::PodLookup {
                namespace,
                pod: format!("(every pod on node {node})"),
                reason: "this locator cannot list pods".to_owned(),
            })
        }
    }

    /// The annotation `key` of the pod `namespace/name` (`None`: not set). A locator that
    /// cannot read annotations refuses.
    fn annotation(
        &self,
        namespace: &str,
        name: &str,
        key: &str,
    ) -> impl Future<Output = Result<Option<String>>> + Send {
        let (namespace, pod, key) = (namespace.to_owned(), name.to_owned(), key.to_owned());
        async move {
            Err(Error::PodLookup {
                namespace,
                pod,
                reason: format!("this locator cannot read the annotation {key}"),
            })
        }
    }
}

/// The API, through kube-rs with the in-cluster (or kubeconfig) configuration.
#[derive(Clone)]
pub struct KubeLocator {
    /// The client.
    pub client: kube::Client,
}

impl KubeLocator {
    /// A client from the in-cluster service account (or `$KUBECONFIG`).
    pub async fn try_default() -> Result<KubeLocator> {
        let client = kube::Client::try_default()
            .await
            .map_err(|error| Error::Client(error.to_string()))?;
        Ok(KubeLocator { client })
    }

    /// The Pod `namespace/name` from the API server.
    async fn get(&self, namespace: &str, name: &str) -> Result<Pod> {
        let api: kube::Api<Pod> = kube::Api::namespaced(self.client.clone(), namespace);
        api.get(name).await.map_err(|error| Error::PodLookup {
            namespace: namespace.to_owned(),
            pod: name.to_owned(),
            reason: error.to_string(),
        })
    }
}

impl Locator for KubeLocator {
    async fn pod(&self, namespace: &str, name: &str) -> Result<PodView> {
        Ok(PodView::from_pod(&self.get(namespace, name).await?))
    }

    async fn pods_on_node(&self, namespace: &str, node: &str) -> Result<Vec<PodView>> {
        let api: kube::Api<Pod> = kube::Api::namespaced(self.client.clone(), namespace);
        let params = kube::api::ListParams::default().fields(&format!("spec.nodeName={node}"));
        let list = api.list(&params).await.map_err(|error| Error::PodLookup {
            namespace: namespace.to_owned(),
            pod: format!("(every pod on node {node})"),
            reason: error.to_string(),
        })?;
        // The field selector is the server's; the node is checked here too.
        Ok(list
            .items
            .iter()
            .map(PodView::from_pod)
            .filter(|view| view.node_name.as_deref() == Some(node))
            .collect())
    }

    async fn annotation(&self, namespace: &str, name: &str, key: &str) -> Result<Option<String>> {
        Ok(self
            .get(namespace, name)
            .await?
            .metadata
            .annotations
            .as_ref()
            .and_then(|annotations| annotations.get(key).cloned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "4f797c539e6c745de61a93ca3ff892358ecbcaccd8414d5db545c38428142970";

    // The agent acts only in the namespaces it was given (the harness's playground and its
    // own), so a mistaken or hostile request cannot reach other workloads of the cluster.
    #[test]
    fn the_namespace_guard_names_the_namespace_and_the_allowed_list() {
        let allowed = vec![
            "bloodraven-playground".to_owned(),
            "bloodraven-harness".to_owned(),
        ];
        assert!(check_namespace("bloodraven-playground", &allowed).is_ok());
        let error = check_namespace("kube-system", &allowed)
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "refused: namespace \"kube-system\" is not one this agent may touch (allowed: bloodraven-playground, bloodraven-harness)"
        );
        assert!(check_namespace("x", &[])
            .unwrap_err()
            .to_string()
            .contains("allowed: none"));
    }

    fn pod(json: serde_json::Value) -> PodView {
        PodView::from_pod(&serde_json::from_value(json).unwrap())
    }

    fn site_pod() -> PodView {
        pod(serde_json::json!({
            "metadata": {"namespace": "br", "name": "iad-0", "uid": "1b9a8a5e-0d7f-4b0e-9c1e-6e5a3e0b2c11"},
            "spec": {"nodeName": "node-iad", "containers": [{"name": "mysql"}, {"name": "sidecar"}]},
            "status": {
                "containerStatuses": [
                    {"name": "mysql", "containerID": format!("containerd://{ID}"), "image": "", "imageID": "", "ready": true, "restartCount": 0},
                    {"name": "sidecar", "image": "", "imageID": "", "ready": false, "restartCount": 0}
                ],
                "initContainerStatuses": [
                    {"name": "init", "containerID": format!("cri-o://{ID}"), "image": "", "imageID": "", "ready": false, "restartCount": 0}
                ]
            }
        }))
    }

    #[test]
    fn the_container_id_comes_from_the_status_on_this_node_only() {
        let view = site_pod();
        assert_eq!(view.containers.len(), 3);
        let id = view.container_target("mysql", Some("node-iad")).unwrap();
        assert_eq!(id.to_string(), format!("containerd://{ID}"));
        assert_eq!(view.container_target("mysql", None).unwrap().id, ID);
        assert_eq!(
            view.container_target("init", Some("node-iad"))
                .unwrap()
                .runtime,
            "cri-o"
        );
        let error = |container: &str, node: &str| {
            view.container_target(container, Some(node))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            error("mysql", "node-pdx"),
            "refused: pod br/iad-0 runs on node \"node-iad\", not on this agent's node \"node-pdx\": ask the agent of that node"
        );
        assert!(error("sidecar", "node-iad").contains("no containerID yet"));
        let absent = error("mysqld", "node-iad");
        assert!(
            absent.contains("container \"mysqld\" of pod br/iad-0")
                && absent.contains("lists: mysql, sidecar, init"),
            "{absent}"
        );
        let unscheduled = pod(serde_json::json!({"metadata": {"namespace": "br", "name": "p"}}));
        assert!(unscheduled
            .container_target("mysql", Some("n"))
            .unwrap_err()
            .to_string()
            .contains("runs on node \"\""));
    }

    // A keepDown waits for every other container of the pod to be up before it takes a new
    // container cgroup for its own container's restart, except those the kubelet will not
    // run again in this sandbox: completed init containers (not restartable sidecars) and
    // terminated ephemeral containers. An ephemeral container in the spec without a status
    // yet is listed, not up.
    #[test]
    fn finished_containers_are_those_the_kubelet_does_not_run_again() {
        let terminated = |name: &str, code: i32| {
            serde_json::json!({"name": name, "containerID": format!("containerd://{ID}"), "image": "",
                "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": code}}})
        };
        let running = |name: &str| {
            serde_json::json!({"name": name, "containerID": format!("containerd://{ID}"), "image": "",
                "imageID": "", "ready": true, "restartCount": 0,
                "state": {"running": {}}})
        };
        let view = pod(serde_json::json!({
            "metadata": {"namespace": "br", "name": "iad-0", "uid": "1b9a8a5e-0d7f-4b0e-9c1e-6e5a3e0b2c11"},
            "spec": {
                "containers": [{"name": "mysql"}],
                "initContainers": [{"name": "setup"}, {"name": "broken"}, {"name": "proxy", "restartPolicy": "Always"}],
                "ephemeralContainers": [{"name": "debug-done"}, {"name": "debug-on"}, {"name": "debug-new"}]
            },
            "status": {
                "containerStatuses": [terminated("mysql", 0)],
                "initContainerStatuses": [terminated("setup", 0), terminated("broken", 1), terminated("proxy", 0)],
                "ephemeralContainerStatuses": [terminated("debug-done", 137), running("debug-on")]
            }
        }));
        let finished: Vec<(&str, bool, bool)> = view
            .containers
            .iter()
            .map(|c| (c.name.as_str(), c.finished, c.container_id.is_some()))
            .collect();
        assert_eq!(
            finished,
            vec![
                ("mysql", false, true),
                ("setup", true, true),
                ("broken", false, true),
                ("proxy", false, true),
                ("debug-done", true, true),
                ("debug-on", false, true),
                ("debug-new", false, false),
            ]
        );
    }

    // A peer pod is cut at the addresses its status lists (podIPs, else podIP), each one
    // address; a pod without one yet has none.
    #[test]
    fn a_pods_addresses_come_from_its_status() {
        let with = |status: serde_json::Value| {
            pod(serde_json::json!({
                "metadata": {"namespace": "br", "name": "pdx-0"},
                "status": status
            }))
        };
        let dual = with(serde_json::json!({
            "podIP": "10.244.2.9",
            "podIPs": [{"ip": "10.244.2.9"}, {"ip": "fd00::2:9"}]
        }));
        assert_eq!(dual.ips, vec!["10.244.2.9", "fd00::2:9"]);
        let shown: Vec<String> = dual
            .addresses()
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(shown, vec!["10.244.2.9", "fd00::2:9"]);
        assert_eq!(
            with(serde_json::json!({"podIP": "10.244.2.9"})).ips,
            vec!["10.244.2.9"]
        );
        assert!(with(serde_json::json!({})).addresses().unwrap().is_empty());
        let bad = with(serde_json::json!({"podIP": "pdx"}))
            .addresses()
            .unwrap_err()
            .to_string();
        assert!(
            bad.contains("pod br/pdx-0") && bad.contains("pod IP \"pdx\""),
            "{bad}"
        );
        let net = with(serde_json::json!({"podIP": "10.244.0.0/16"}))
            .addresses()
            .unwrap_err()
            .to_string();
        assert!(net.contains("a network, not an address"), "{net}");
    }

    #[test]
    fn a_partition_targets_the_pod_but_never_the_hosts_network() {
        let (uid, ids) = site_pod().network_target(Some("node-iad")).unwrap();
        assert_eq!(uid, "1b9a8a5e-0d7f-4b0e-9c1e-6e5a3e0b2c11");
        assert_eq!(ids.len(), 2);
        let mut host = site_pod();
        host.host_network = true;
        assert!(host
            .network_target(Some("node-iad"))
            .unwrap_err()
            .to_string()
            .contains("hostNetwork"));
        assert!(site_pod().network_target(Some("other")).is_err());
    }
}
