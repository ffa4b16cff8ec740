//! Garbage collection by ownerReferences: dependents of deleted owners are deleted
//! (background), owners deleting in the foreground wait for their dependents, orphaning
//! owners release them.

use super::super::cluster::{Cluster, DeleteOptions};
use super::super::meta;
use super::controller::{log_err, Controller};
use jiff::Timestamp;
use serde_json::Value;
use std::collections::HashMap;

/// How long Events are kept.
const EVENT_TTL_SECONDS: i64 = 3600;

/// The garbage collector.
pub struct GarbageCollector;

fn owner_uids(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|owner_reference| meta::str_at(owner_reference, "/uid").to_string())
        .collect()
}

fn has_finalizer(object: &Value, finalizer: &str) -> bool {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|held| held.iter().any(|name| name.as_str() == Some(finalizer)))
        .unwrap_or(false)
}

fn remove_finalizer(cluster: &Cluster, key: &str, object: &Value, finalizer: &str) {
    let Some(resource) = cluster.registry.by_storage_key(key).into_iter().next() else {
        return;
    };
    let finalizer = finalizer.to_string();
    log_err(
        "garbage-collector",
        "remove finalizer",
        cluster.modify(
            &resource.group,
            &resource.plural,
            meta::namespace(object),
            meta::name(object),
            None,
            "garbage-collector",
            |written| {
                let Some(finalizers) = written
                    .pointer_mut("/metadata/finalizers")
                    .and_then(Value::as_array_mut)
                else {
                    return false;
                };
                let before = finalizers.len();
                finalizers.retain(|name| name.as_str() != Some(finalizer.as_str()));
                before != finalizers.len()
            },
        ),
    );
}

impl Controller for GarbageCollector {
    fn name(&self) -> &'static str {
        "garbage-collector"
    }
    fn reconcile(&mut self, cluster: &Cluster, _now: Timestamp) {
        let all = cluster.store.all_objects();
        let by_uid: HashMap<&str, &Value> = all
            .iter()
            .map(|(_, object)| (meta::uid_of(object), object))
            .collect();
        let mut dependents: HashMap<String, usize> = HashMap::new();
        for (key, object) in &all {
            let owners = owner_uids(object);
            for owner in &owners {
                *dependents.entry(owner.clone()).or_default() += 1;
            }
            if !owners.is_empty() {
                collect_dependent(cluster, key, object, &owners, &by_uid);
            }
        }
        expire_events(cluster, &all);
        // Owners whose dependents are all gone lose their `foregroundDeletion` or `orphan`
        // finalizer.
        for (key, object) in &all {
            if object.pointer("/metadata/deletionTimestamp").is_none() {
                continue;
            }
            let waiting = dependents.get(meta::uid_of(object)).copied().unwrap_or(0);
            for finalizer in ["foregroundDeletion", "orphan"] {
                if has_finalizer(object, finalizer) && waiting == 0 {
                    remove_finalizer(cluster, key, object, finalizer);
                }
            }
        }
    }
}

/// Whether `owner` is being deleted and holds `finalizer`.
fn deleting_with(owner: &Value, finalizer: &str) -> bool {
    owner.pointer("/metadata/deletionTimestamp").is_some() && has_finalizer(owner, finalizer)
}

/// One dependent (an object with `owners`): deleted in the background when its owners are
/// all gone; released by owners that orphan; deleted in the foreground when all its owners
/// are deleting in the foreground.
fn collect_dependent(
    cluster: &Cluster,
    key: &str,
    object: &Value,
    owners: &[String],
    by_uid: &HashMap<&str, &Value>,
) {
    let Some(resource) = cluster.registry.by_storage_key(key).into_iter().next() else {
        return;
    };
    let (namespace, name) = (
        meta::namespace(object).to_string(),
        meta::name(object).to_string(),
    );
    let live: Vec<&Value> = owners
        .iter()
        .filter_map(|owner| by_uid.get(owner.as_str()).copied())
        .collect();
    let deleting = object.pointer("/metadata/deletionTimestamp").is_some();
    if live.is_empty() {
        if !deleting {
            tracing::debug!(resource = %resource.plural, namespace = %namespace, name = %name, "deleting a dependent whose owners are gone");
            let options = DeleteOptions {
                propagation: Some("Background".into()),
                ..Default::default()
            };
            let deleted = cluster.delete(&resource, &namespace, &name, &options);
            log_err("garbage-collector", "delete dependent", deleted);
        }
        return;
    }
    let orphaning: Vec<String> = live
        .iter()
        .filter(|owner| deleting_with(owner, "orphan"))
        .map(|owner| meta::uid_of(owner).to_string())
        .collect();
    if !orphaning.is_empty() {
        let release = |dependent: &mut Value| {
            let Some(references) = dependent
                .pointer_mut("/metadata/ownerReferences")
                .and_then(Value::as_array_mut)
            else {
                return false;
            };
            references.retain(|reference| {
                !orphaning
                    .iter()
                    .any(|uid| uid == meta::str_at(reference, "/uid"))
            });
            if references.is_empty() {
                if let Some(metadata) = dependent["metadata"].as_object_mut() {
                    metadata.remove("ownerReferences");
                }
            }
            true
        };
        let released = cluster.modify(
            &resource.group,
            &resource.plural,
            &namespace,
            &name,
            None,
            "garbage-collector",
            release,
        );
        log_err("garbage-collector", "orphan dependent", released);
        return;
    }
    let all_foreground = live
        .iter()
        .all(|owner| deleting_with(owner, "foregroundDeletion"));
    if all_foreground && !deleting {
        let options = DeleteOptions {
            propagation: Some("Foreground".into()),
            ..Default::default()
        };
        let deleted = cluster.delete(&resource, &namespace, &name, &options);
        log_err(
            "garbage-collector",
            "delete dependent (foreground)",
            deleted,
        );
    }
}

/// Events expire after an hour, as with the real server's event TTL.
fn expire_events(cluster: &Cluster, all: &[(String, Value)]) {
    let expired = meta::add_seconds(Timestamp::now(), -EVENT_TTL_SECONDS);
    for (key, event) in all
        .iter()
        .filter(|(key, _)| key == "/events" || key == "events.k8s.io/events")
    {
        let last = [
            "/lastTimestamp",
            "/eventTime",
            "/series/lastObservedTime",
            "/metadata/creationTimestamp",
        ]
        .iter()
        .filter_map(|pointer| {
            event
                .pointer(pointer)
                .and_then(Value::as_str)
                .and_then(meta::parse_time)
        })
        .max();
        if !last.map(|time| time < expired).unwrap_or(false) {
            continue;
        }
        if let Some(resource) = cluster.registry.by_storage_key(key).into_iter().next() {
            let deleted = cluster.delete(
                &resource,
                meta::namespace(event),
                meta::name(event),
                &DeleteOptions::default(),
            );
            log_err("garbage-collector", "expire event", deleted);
        }
    }
}
