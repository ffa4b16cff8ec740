//! `pods`: one pod (by site or name) or the operator's pods, with the phase, labels,
//! restarts and node labels they must have; `phase: absent` for a pod that is gone.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::target::{ExpectTarget, Judging, Substitution, Validation};
use crate::error::Result;
use crate::live::observe::cluster_error;
use crate::live::LiveCluster;
use crate::playground::names::{NAMESPACE, OPERATOR_NAMESPACE};
use crate::scenario::matcher::{check_operators, matches};
use crate::scenario::model::Site;

/// Pods of the group (or selected by labels), with the phase and labels they must have.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodsExpect {
    /// A site's MySQL pod.
    #[serde(default)]
    pub site: Option<Site>,
    /// A pod by name (e.g. a canary).
    #[serde(default)]
    pub name: Option<String>,
    /// Namespace (default `bloodraven-playground`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Pods whose phase must be this (`Running`, `Pending`, ...); `absent` = no such pod.
    #[serde(default)]
    pub phase: Option<String>,
    /// Labels that must be present with these values (partial match).
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    /// The container's restart count, partial match (e.g. `{$gt: 0}`).
    #[serde(default)]
    pub restarts: Option<Value>,
    /// Every pod of the operator (namespace `bloodraven`, `app.kubernetes.io/name=bloodraven`,
    /// not terminating) instead of one pod.
    #[serde(default)]
    pub operator: bool,
    /// The labels of the node each pod runs on, partial match: `{topology.kubernetes.io/zone:
    /// {$exists: false}}` = on no site's node. An unscheduled pod has none and fails it.
    #[serde(default)]
    pub node_labels: Option<Value>,
}

/// The pods found (none when absent): each a Pod object with `nodeLabels`, its node's labels
/// (absent when unscheduled or not asked for).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PodsFound(pub Vec<Value>);

impl PodsExpect {
    /// The one pod it names: `name`, else the site's MySQL pod of the playground group;
    /// `None` when it names neither.
    pub fn pod_name(&self) -> Option<String> {
        match (&self.name, self.site) {
            (Some(name), _) => Some(name.clone()),
            (None, Some(site)) => Some(bloodraven_api::names::pod(
                bloodraven_api::names::PLAYGROUND_GROUP,
                site.name(),
            )),
            (None, None) => None,
        }
    }

    /// The pod it names: `namespace/name`.
    fn subject(&self) -> Option<String> {
        let namespace = self.namespace.as_deref().unwrap_or(NAMESPACE);
        let name = self.pod_name()?;
        Some(format!("{namespace}/{name}"))
    }

    /// The pods it selects, without their nodes' labels.
    async fn find(&self, live: &LiveCluster) -> Result<Vec<Pod>> {
        if self.operator {
            let api: Api<Pod> = Api::namespaced(live.client().clone(), OPERATOR_NAMESPACE);
            return Ok(api
                .list(&ListParams::default().labels("app.kubernetes.io/name=bloodraven"))
                .await
                .map_err(|e| cluster_error("list operator pods", e))?
                .into_iter()
                .filter(|pod| pod.metadata.deletion_timestamp.is_none())
                .collect());
        }
        let namespace = self.namespace.as_deref().unwrap_or(NAMESPACE);
        let api: Api<Pod> = Api::namespaced(live.client().clone(), namespace);
        let name = self
            .pod_name()
            .ok_or_else(|| cluster_error("observe pods", "neither name nor site"))?;
        Ok(api
            .get_opt(&name)
            .await
            .map_err(|e| cluster_error(format!("read pod {name}"), e))?
            .into_iter()
            .collect())
    }

    /// One pod as observed: the object, with its node's labels when they are asserted.
    async fn with_node_labels(&self, live: &LiveCluster, pod: Pod) -> Result<Value> {
        let node = pod.spec.as_ref().and_then(|spec| spec.node_name.clone());
        let mut value = serde_json::to_value(pod).unwrap_or_default();
        if let (Some(node), true) = (node, self.node_labels.is_some()) {
            let nodes: Api<Node> = Api::all(live.client().clone());
            let labels = nodes
                .get_opt(&node)
                .await
                .map_err(|e| cluster_error(format!("read node {node}"), e))?
                .and_then(|node| node.metadata.labels);
            if let (Some(labels), Some(map)) = (labels, value.as_object_mut()) {
                map.insert(
                    "nodeLabels".to_owned(),
                    serde_json::to_value(labels).unwrap_or_default(),
                );
            }
        }
        Ok(value)
    }

    /// One found pod against everything asserted of it.
    fn judge_pod(&self, pod: &Value, baseline: &PodsFound) -> Result<(), String> {
        let name = pod
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("?");
        if let Some(phase) = &self.phase {
            matches(&json!(phase), pod.pointer("/status/phase"), None)
                .map_err(|why| format!("pod {name} phase: {why}"))?;
        }
        if let Some(labels) = &self.labels {
            let expected = serde_json::to_value(labels).unwrap_or(Value::Null);
            matches(&expected, pod.pointer("/metadata/labels"), None)
                .map_err(|why| format!("pod {name} labels: {why}"))?;
        }
        if let Some(node_labels) = &self.node_labels {
            matches(node_labels, pod.get("nodeLabels"), None)
                .map_err(|why| format!("pod {name} node labels: {why}"))?;
        }
        if let Some(restarts) = &self.restarts {
            // `$changed`/`$unchanged` compare with the same pod's count in the baseline
            // (a pod the baseline lacks has no baseline count).
            let before = baseline
                .0
                .iter()
                .find(|old| old.pointer("/metadata/name").and_then(Value::as_str) == Some(name))
                .map(|old| json!(restart_count(old)));
            matches(restarts, Some(&json!(restart_count(pod))), before.as_ref())
                .map_err(|why| format!("pod {name} restarts: {why}"))?;
        }
        Ok(())
    }
}

impl ExpectTarget for PodsExpect {
    const NAME: &'static str = "pods";
    type Observation = PodsFound;

    fn validate(&self, _validation: &mut Validation<'_>) -> Result<(), String> {
        let selectors = [self.site.is_some(), self.name.is_some(), self.operator];
        if selectors.iter().filter(|given| **given).count() != 1 {
            return Err(
                "pods: needs exactly one of `site`, `name` and `operator: true`".to_owned(),
            );
        }
        if self.phase.is_none()
            && self.labels.is_none()
            && self.restarts.is_none()
            && self.node_labels.is_none()
        {
            return Err(
                "pods: asserts nothing (give phase, labels, restarts or nodeLabels)".to_owned(),
            );
        }
        if let Some(node_labels) = &self.node_labels {
            check_operators(node_labels, "pods.nodeLabels")?;
        }
        if let Some(restarts) = &self.restarts {
            check_operators(restarts, "pods.restarts")?;
        }
        Ok(())
    }

    async fn observe(&self, live: &LiveCluster) -> Result<PodsFound> {
        let found = self.find(live).await?;
        let mut observed = Vec::with_capacity(found.len());
        for pod in found {
            observed.push(self.with_node_labels(live, pod).await?);
        }
        Ok(PodsFound(observed))
    }

    fn evaluate(
        &self,
        observed: &PodsFound,
        judging: &Judging<'_, PodsFound>,
    ) -> Result<(), String> {
        let items = &observed.0;
        if self.phase.as_deref() == Some("absent") {
            return if items.is_empty() {
                Ok(())
            } else {
                Err(format!("expected no pod, found {}", items.len()))
            };
        }
        if items.is_empty() {
            return Err("no such pod".to_owned());
        }
        for pod in items {
            self.judge_pod(pod, judging.baseline)?;
        }
        Ok(())
    }

    fn describe(&self) -> Option<String> {
        let who = self
            .site
            .map(|site| site.to_string())
            .or_else(|| self.name.clone())
            .unwrap_or_default();
        Some(
            format!("{who} {}", self.phase.clone().unwrap_or_default())
                .trim()
                .to_owned(),
        )
    }

    fn substitute(&mut self, substitution: &mut Substitution<'_>) {
        substitution.texts(
            [&mut self.name, &mut self.namespace, &mut self.phase]
                .into_iter()
                .flatten(),
        );
        if let Some(labels) = self.labels.as_mut() {
            substitution.texts(labels.values_mut());
        }
        if let Some(restarts) = self.restarts.as_mut() {
            substitution.json(restarts);
        }
    }

    fn patterns(&self) -> Vec<&Value> {
        self.restarts.iter().collect()
    }

    fn pods_seen(&self, observed: &PodsFound) -> Vec<String> {
        observed
            .0
            .iter()
            .filter_map(|pod| {
                let name = pod.pointer("/metadata/name")?.as_str()?;
                let namespace = pod
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .or(self.namespace.as_deref())
                    .unwrap_or(NAMESPACE);
                Some(format!("{namespace}/{name}"))
            })
            .collect()
    }

    /// `phase: absent` holds only for a pod this run has seen: a pod that never existed
    /// (a misspelt name, a pod that was never created) is absent too, and would pass.
    fn check_seen(&self, seen_pods: &BTreeSet<String>) -> Result<(), String> {
        if self.phase.as_deref() != Some("absent") {
            return Ok(());
        }
        match self.subject() {
            Some(name) if !seen_pods.contains(&name) => Err(format!(
                "pod {name} is absent, but this run never saw it: `phase: absent` asserts that a pod \
                 that existed is gone (observe it before the step that removes it)"
            )),
            _ => Ok(()),
        }
    }
}

/// The sum of a pod's containers' `restartCount`.
fn restart_count(pod: &Value) -> u64 {
    pod.pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .map(|statuses| {
            statuses
                .iter()
                .filter_map(|status| status.get("restartCount").and_then(Value::as_u64))
                .sum()
        })
        .unwrap_or(0)
}
