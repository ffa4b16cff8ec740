//! Namespace deletion: deletes the namespace's contents, then removes the `kubernetes`
//! finalizer so the namespace goes away.

use super::super::cluster::{Cluster, DeleteOptions};
use super::super::meta;
use super::super::registry::Subresource;
use super::controller::{log_err, Controller};
use jiff::Timestamp;
use serde_json::{json, Value};

/// Finalizes terminating namespaces.
pub struct NamespaceController;

impl Controller for NamespaceController {
    fn name(&self) -> &'static str {
        "namespace"
    }
    fn reconcile(&mut self, cluster: &Cluster, _now: Timestamp) {
        let (nss, _) = cluster.store.list("/namespaces", None);
        for ns in nss
            .iter()
            .filter(|n| n.pointer("/metadata/deletionTimestamp").is_some())
        {
            let name = meta::name(ns).to_string();
            let mut remaining = 0;
            for r in cluster
                .registry
                .all()
                .into_iter()
                .filter(|resource| resource.namespaced && !resource.create_only)
            {
                let (items, _) = cluster.store.list(&r.storage_key(), Some(&name));
                remaining += items.len();
                for i in items
                    .iter()
                    .filter(|item| item.pointer("/metadata/deletionTimestamp").is_none())
                {
                    log_err(
                        "namespace",
                        "delete content",
                        cluster.delete(
                            &r,
                            &name,
                            meta::name(i),
                            &DeleteOptions {
                                grace_period_seconds: Some(0),
                                ..Default::default()
                            },
                        ),
                    );
                }
            }
            if remaining == 0 {
                log_err(
                    "namespace",
                    "finalize",
                    cluster.modify(
                        "",
                        "namespaces",
                        "",
                        &name,
                        Some(Subresource::Finalize),
                        "namespace-controller",
                        |n| {
                            let has = n
                                .pointer("/spec/finalizers")
                                .and_then(Value::as_array)
                                .map(|a| !a.is_empty())
                                .unwrap_or(false);
                            if has {
                                n["spec"]["finalizers"] = json!([]);
                            }
                            has
                        },
                    ),
                );
            }
        }
    }
}
