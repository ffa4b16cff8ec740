//! Garbage collection by ownerReferences: dependents of deleted owners are deleted
//! (background), owners deleting in the foreground wait for their dependents, orphaning
//! owners release them.

use super::super::meta;
use super::super::ops::{Cluster, DeleteOptions};
use super::manager::{log_err, Controller};
use jiff::Timestamp;
use serde_json::Value;
use std::collections::HashMap;

/// How long Events are kept.
const EVENT_TTL_SECONDS: i64 = 3600;

/// The garbage collector.
pub struct GarbageCollector;

fn owner_uids(o: &Value) -> Vec<String> {
    o.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|r| meta::str_at(r, "/uid").to_string())
        .collect()
}

fn has_finalizer(o: &Value, f: &str) -> bool {
    o.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().any(|x| x.as_str() == Some(f)))
        .unwrap_or(false)
}

fn remove_finalizer(c: &Cluster, key: &str, o: &Value, f: &str) {
    let Some(r) = c.registry.by_storage_key(key).into_iter().next() else {
        return;
    };
    let fin = f.to_string();
    log_err(
        "garbage-collector",
        "remove finalizer",
        c.modify(
            &r.group,
            &r.plural,
            meta::namespace(o),
            meta::name(o),
            None,
            "garbage-collector",
            |obj| {
                let Some(a) = obj
                    .pointer_mut("/metadata/finalizers")
                    .and_then(Value::as_array_mut)
                else {
                    return false;
                };
                let before = a.len();
                a.retain(|x| x.as_str() != Some(fin.as_str()));
                before != a.len()
            },
        ),
    );
}

impl Controller for GarbageCollector {
    fn name(&self) -> &'static str {
        "garbage-collector"
    }
    fn reconcile(&mut self, c: &Cluster, _now: Timestamp) {
        let all = c.store.all_objects();
        let by_uid: HashMap<&str, (&str, &Value)> = all
            .iter()
            .map(|(k, o)| (meta::uid_of(o), (k.as_str(), o)))
            .collect();
        let mut dependents: HashMap<String, usize> = HashMap::new();
        for (key, o) in &all {
            let owners = owner_uids(o);
            if owners.is_empty() {
                continue;
            }
            for u in &owners {
                *dependents.entry(u.clone()).or_default() += 1;
            }
            let Some(r) = c.registry.by_storage_key(key).into_iter().next() else {
                continue;
            };
            let (ns, name) = (meta::namespace(o).to_string(), meta::name(o).to_string());
            let live: Vec<&Value> = owners
                .iter()
                .filter_map(|u| by_uid.get(u.as_str()).map(|(_, ow)| *ow))
                .collect();
            if live.is_empty() {
                if o.pointer("/metadata/deletionTimestamp").is_none() {
                    tracing::debug!(resource = %r.plural, namespace = %ns, name = %name, "deleting a dependent whose owners are gone");
                    log_err(
                        "garbage-collector",
                        "delete dependent",
                        c.delete(
                            &r,
                            &ns,
                            &name,
                            &DeleteOptions {
                                propagation: Some("Background".into()),
                                ..Default::default()
                            },
                        ),
                    );
                }
                continue;
            }
            let orphaning: Vec<String> = live
                .iter()
                .filter(|ow| {
                    ow.pointer("/metadata/deletionTimestamp").is_some()
                        && has_finalizer(ow, "orphan")
                })
                .map(|ow| meta::uid_of(ow).to_string())
                .collect();
            if !orphaning.is_empty() {
                log_err(
                    "garbage-collector",
                    "orphan dependent",
                    c.modify(
                        &r.group,
                        &r.plural,
                        &ns,
                        &name,
                        None,
                        "garbage-collector",
                        |obj| {
                            let Some(refs) = obj
                                .pointer_mut("/metadata/ownerReferences")
                                .and_then(Value::as_array_mut)
                            else {
                                return false;
                            };
                            refs.retain(|x| {
                                !orphaning.iter().any(|u| u == meta::str_at(x, "/uid"))
                            });
                            if refs.is_empty() {
                                if let Some(m) = obj["metadata"].as_object_mut() {
                                    m.remove("ownerReferences");
                                }
                            }
                            true
                        },
                    ),
                );
                continue;
            }
            let foreground = live.iter().any(|ow| {
                ow.pointer("/metadata/deletionTimestamp").is_some()
                    && has_finalizer(ow, "foregroundDeletion")
            });
            let all_deleting = live.iter().all(|ow| {
                ow.pointer("/metadata/deletionTimestamp").is_some()
                    && has_finalizer(ow, "foregroundDeletion")
            });
            if foreground && all_deleting && o.pointer("/metadata/deletionTimestamp").is_none() {
                log_err(
                    "garbage-collector",
                    "delete dependent (foreground)",
                    c.delete(
                        &r,
                        &ns,
                        &name,
                        &DeleteOptions {
                            propagation: Some("Foreground".into()),
                            ..Default::default()
                        },
                    ),
                );
            }
        }
        // Events expire after an hour, as with the real server's event TTL.
        let expired = meta::add_seconds(Timestamp::now(), -EVENT_TTL_SECONDS);
        for (key, o) in all
            .iter()
            .filter(|(k, _)| k == "/events" || k == "events.k8s.io/events")
        {
            let last = [
                "/lastTimestamp",
                "/eventTime",
                "/series/lastObservedTime",
                "/metadata/creationTimestamp",
            ]
            .iter()
            .filter_map(|p| {
                o.pointer(p)
                    .and_then(Value::as_str)
                    .and_then(meta::parse_time)
            })
            .max();
            if last.map(|t| t < expired).unwrap_or(false) {
                if let Some(r) = c.registry.by_storage_key(key).into_iter().next() {
                    log_err(
                        "garbage-collector",
                        "expire event",
                        c.delete(
                            &r,
                            meta::namespace(o),
                            meta::name(o),
                            &DeleteOptions::default(),
                        ),
                    );
                }
            }
        }
        for (key, o) in &all {
            if o.pointer("/metadata/deletionTimestamp").is_none() {
                continue;
            }
            let waiting = dependents.get(meta::uid_of(o)).copied().unwrap_or(0);
            for f in ["foregroundDeletion", "orphan"] {
                if has_finalizer(o, f) && waiting == 0 {
                    remove_finalizer(c, key, o, f);
                }
            }
        }
    }
}
