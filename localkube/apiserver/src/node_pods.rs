//! What a node agent needs from the API server, in-process: the pods bound to a node, pod
//! status writes (as the kubelet's `pods/status` updates), and completing a graceful pod
//! deletion once the pod's processes are gone. A node agent is a [`super::plugin::Plugin`]
//! whose `runs_pods()` is true; it reacts to `cluster.store.subscribe()` events for the
//! `/pods` storage key ([`PODS`]).

use super::cluster::{Cluster, DeleteOptions};
use super::error::{ApiError, Reason};
use super::meta;
use super::registry::Subresource;
use super::store::StoreEvent;
use serde_json::Value;

/// Storage key of pods in store events.
pub const PODS: &str = "/pods";

/// Whether a store event concerns a pod bound to `node` (before or after the change).
pub fn is_pod_event_for_node(ev: &StoreEvent, node: &str) -> bool {
    ev.key == PODS
        && (meta::str_at(&ev.object, "/spec/nodeName") == node
            || ev
                .old
                .as_ref()
                .map(|object| meta::str_at(object, "/spec/nodeName") == node)
                .unwrap_or(false))
}

impl Cluster {
    /// Pods bound to `node`, including those being deleted.
    pub fn pods_on_node(&self, node: &str) -> Vec<Value> {
        let (pods, _) = self.store.list(PODS, None);
        pods.into_iter()
            .filter(|pod| meta::str_at(pod, "/spec/nodeName") == node)
            .collect()
    }

    /// Updates a pod's status through the status subresource; `f` returns whether it
    /// changed anything. `Ok(None)` when the pod is gone.
    pub fn update_pod_status(
        &self,
        ns: &str,
        name: &str,
        f: impl Fn(&mut Value) -> bool,
    ) -> Result<Option<Value>, ApiError> {
        self.modify(
            "",
            "pods",
            ns,
            name,
            Some(Subresource::Status),
            "kubelet",
            f,
        )
    }

    /// Removes a pod whose graceful deletion the node agent has carried out (its processes
    /// are gone), as the kubelet's final delete with grace period 0. A pod with the same
    /// name but another uid is left alone.
    pub fn finish_pod_deletion(&self, ns: &str, name: &str, uid: &str) -> Result<(), ApiError> {
        let Some(resource) = self.resource("", "pods") else {
            return Ok(());
        };
        let options = DeleteOptions {
            grace_period_seconds: Some(0),
            precondition_uid: Some(uid.to_string()),
            ..Default::default()
        };
        match self.delete(&resource, ns, name, &options) {
            Ok(_) => Ok(()),
            Err(ApiError {
                reason: Reason::NotFound,
                ..
            }) => Ok(()),
            Err(error) => Err(error),
        }
    }
}
