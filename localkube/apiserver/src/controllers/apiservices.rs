//! APIServices (`apiregistration.k8s.io/v1`): one per served group version, as the real
//! server's aggregator registers them: built-in groups labelled
//! `kube-aggregator.kubernetes.io/automanaged: onstart`, custom resource groups `"true"`
//! (and removed when their last CRD version goes). All are local: no `spec.service`, and
//! `Available` is always true.

use super::super::cluster::Cluster;
use super::super::meta;
use super::super::registry::ResourceInfo;
use super::controller::{log_err, Controller};
use jiff::Timestamp;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The label the aggregator puts on the APIServices it manages.
const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";
/// Storage key of APIServices.
const KEY: &str = "apiregistration.k8s.io/apiservices";

/// Keeps one APIService per served group version.
pub struct ApiServiceController;

/// `<version>.<group>` (`v1.` for the core group), with its `automanaged` label value.
fn wanted(resources: &[ResourceInfo]) -> BTreeMap<String, (String, String, &'static str)> {
    resources
        .iter()
        .map(|resource| {
            let managed = if resource.crd.is_some() {
                "true"
            } else {
                "onstart"
            };
            let name = format!("{}.{}", resource.version, resource.group);
            (
                name,
                (resource.group.clone(), resource.version.clone(), managed),
            )
        })
        .collect()
}

fn api_service(name: &str, group: &str, version: &str, managed: &str, now: &str) -> Value {
    // The real server's priorities: built-in groups rank high, custom ones at 1000.
    let priority = if managed == "onstart" { 18000 } else { 1000 };
    json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": name, "labels": {AUTOMANAGED: managed}},
        "spec": {"group": group, "version": version, "groupPriorityMinimum": priority, "versionPriority": 15},
        "status": {"conditions": [{"type": "Available", "status": "True", "lastTransitionTime": now,
            "reason": "Local", "message": "Local APIServices are always available"}]}})
}

impl Controller for ApiServiceController {
    fn name(&self) -> &'static str {
        "apiservices"
    }
    fn reconcile(&mut self, cluster: &Cluster, now: Timestamp) {
        let want = wanted(&cluster.registry.all());
        for (name, (group, version, managed)) in &want {
            if cluster.store.get(KEY, "", name).is_some() {
                continue;
            }
            let obj = api_service(name, group, version, managed, &meta::time(now));
            tracing::debug!(apiservice = %name, "registering APIService");
            log_err(
                "apiservices",
                "create APIService",
                cluster.create_internal(
                    "apiregistration.k8s.io",
                    "apiservices",
                    "",
                    obj,
                    "kube-aggregator",
                ),
            );
        }
        let (have, _) = cluster.store.list(KEY, None);
        for gone in have.iter().filter(|a| {
            meta::str_at(
                a,
                "/metadata/labels/kube-aggregator.kubernetes.io~1automanaged",
            ) == "true"
                && !want.contains_key(meta::name(a))
        }) {
            log_err(
                "apiservices",
                "delete APIService",
                cluster.delete_internal(
                    "apiregistration.k8s.io",
                    "apiservices",
                    "",
                    meta::name(gone),
                    None,
                ),
            );
        }
    }
}
