//! Events written through `events.k8s.io/v1` show through `core/v1` too.
//!
//! A real API server keeps one storage for both Event APIs: an event that kube-rs's
//! `Recorder` (or client-go's new recorder) publishes as `events.k8s.io/v1` is listed by
//! `kubectl get events`, `kubectl describe` and every `core/v1` reader. localkube stores the two
//! APIs apart, so this controller mirrors each `events.k8s.io/v1` Event into a `core/v1` Event
//! of the same namespace and name, converted field by field the way the API server converts
//! them (regarding -> involvedObject, note -> message, reportingController ->
//! reportingComponent and source.component, series -> count and lastTimestamp), updates the
//! mirror when the source changes (a recorder patching a series) and deletes it with the
//! source. A mirror carries [`MIRROR_ANNOTATION`]; `core/v1` writes are not mirrored back
//! (`kubectl get events.events.k8s.io` does not list the kubelet's core events).

use std::collections::HashMap;

use jiff::Timestamp;
use serde_json::{json, Map, Value};

use super::super::cluster::Cluster;
use super::super::meta;
use super::controller::{log_err, Controller};

/// The annotation naming the `events.k8s.io/v1` resourceVersion a `core/v1` mirror shows.
pub const MIRROR_ANNOTATION: &str = "localkube.io/mirror-of-events-k8s-io";
const SOURCE_KEY: &str = "events.k8s.io/events";
const MIRROR_KEY: &str = "/events";
const MANAGER: &str = "localkube-event-mirror";

/// Keeps the `core/v1` mirrors of `events.k8s.io/v1` Events.
#[derive(Default)]
pub struct EventMirror {
    /// Per source `(namespace, name)`, the resourceVersion last mirrored.
    mirrored: HashMap<(String, String), String>,
}

impl Controller for EventMirror {
    fn name(&self) -> &'static str {
        "event-mirror"
    }

    fn reconcile(&mut self, cluster: &Cluster, _now: Timestamp) {
        let (sources, _) = cluster.store.list(SOURCE_KEY, None);
        let mut seen = HashMap::with_capacity(sources.len());
        for source in &sources {
            let key = (
                meta::namespace(source).to_owned(),
                meta::name(source).to_owned(),
            );
            let rv = meta::str_at(source, "/metadata/resourceVersion").to_owned();
            if self.mirrored.get(&key) != Some(&rv) {
                mirror(cluster, source, &rv);
            }
            seen.insert(key, rv);
        }
        // Sources gone: their mirrors go too (also those of an earlier localkube run).
        let (mirrors, _) = cluster.store.list(MIRROR_KEY, None);
        for mirror in mirrors.iter().filter(|map| {
            map.pointer("/metadata/annotations")
                .and_then(|annotation| annotation.get(MIRROR_ANNOTATION))
                .is_some()
        }) {
            let key = (
                meta::namespace(mirror).to_owned(),
                meta::name(mirror).to_owned(),
            );
            if !seen.contains_key(&key) {
                log_err(
                    "event-mirror",
                    "delete mirror",
                    cluster.delete_internal("", "events", &key.0, &key.1, None),
                );
            }
        }
        self.mirrored = seen;
    }
}

fn mirror(cluster: &Cluster, source: &Value, rv: &str) {
    let ns = meta::namespace(source);
    let name = meta::name(source);
    let converted = to_core(source, rv);
    if cluster.store.get(MIRROR_KEY, ns, name).is_none() {
        log_err(
            "event-mirror",
            "create mirror",
            cluster.create_internal("", "events", ns, converted, MANAGER),
        );
        return;
    }
    log_err(
        "event-mirror",
        "update mirror",
        cluster.modify("", "events", ns, name, None, MANAGER, |event| {
            let Some(current) = event.as_object_mut() else {
                return false;
            };
            let metadata = current.get("metadata").cloned().unwrap_or(Value::Null);
            let mut next = converted.clone();
            // Keep the mirror's own identity (uid, resourceVersion, creationTimestamp).
            for field in ["uid", "resourceVersion", "creationTimestamp"] {
                if let Some(value) = metadata.get(field) {
                    next["metadata"][field] = value.clone();
                }
            }
            if Value::Object(current.clone()) == next {
                return false;
            }
            *event = next;
            true
        }),
    );
}

/// An `events.k8s.io/v1` Event as the `core/v1` Event the API server would show (pure).
pub fn to_core(source: &Value, rv: &str) -> Value {
    let get = |pointer: &str| source.pointer(pointer).cloned().filter(|v| !v.is_null());
    let mut metadata = Map::new();
    metadata.insert("name".into(), json!(meta::name(source)));
    metadata.insert("namespace".into(), json!(meta::namespace(source)));
    if let Some(labels) = get("/metadata/labels") {
        metadata.insert("labels".into(), labels);
    }
    let mut annotations = get("/metadata/annotations")
        .and_then(|annotation| annotation.as_object().cloned())
        .unwrap_or_default();
    annotations.insert(MIRROR_ANNOTATION.into(), json!(rv));
    metadata.insert("annotations".into(), Value::Object(annotations));
    let mut event = Map::new();
    event.insert("apiVersion".into(), json!("v1"));
    event.insert("kind".into(), json!("Event"));
    event.insert("metadata".into(), Value::Object(metadata));
    event.insert(
        "involvedObject".into(),
        get("/regarding").unwrap_or_else(|| json!({})),
    );
    for (from, to) in [
        ("/related", "related"),
        ("/reason", "reason"),
        ("/note", "message"),
        ("/type", "type"),
        ("/action", "action"),
        ("/eventTime", "eventTime"),
        ("/reportingController", "reportingComponent"),
        ("/reportingInstance", "reportingInstance"),
        ("/deprecatedFirstTimestamp", "firstTimestamp"),
    ] {
        if let Some(value) = get(from) {
            event.insert(to.into(), value);
        }
    }
    let source_block = get("/deprecatedSource").unwrap_or_else(|| {
        let mut block = Map::new();
        if let Some(controller) = get("/reportingController") {
            block.insert("component".into(), controller);
        }
        Value::Object(block)
    });
    event.insert("source".into(), source_block);
    let count = get("/series/count")
        .or_else(|| get("/deprecatedCount"))
        .unwrap_or_else(|| json!(1));
    event.insert("count".into(), count);
    if let Some(last) = get("/deprecatedLastTimestamp")
        .or_else(|| get("/series/lastObservedTime"))
        .or_else(|| get("/eventTime"))
    {
        event.insert("lastTimestamp".into(), last);
    }
    if let Some(series) = get("/series") {
        event.insert("series".into(), series);
    }
    Value::Object(event)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_events_k8s_io_event_converts_as_the_api_server_shows_it() {
        let source = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "playground.1", "namespace": "bloodraven-playground", "resourceVersion": "42"},
            "regarding": {"kind": "MysqlFailoverGroup", "name": "playground", "namespace": "bloodraven-playground"},
            "reason": "PrimaryReasserted", "note": "iad reasserted", "type": "Normal", "action": "Reassert",
            "eventTime": "2026-12-01T12:00:00.000000Z",
            "reportingController": "bloodraven", "reportingInstance": "bloodraven-0",
            "series": {"count": 3, "lastObservedTime": "2026-12-01T12:00:09.000000Z"}
        });
        let core = to_core(&source, "42");
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["kind"], "MysqlFailoverGroup");
        assert_eq!(core["message"], "iad reasserted");
        assert_eq!(core["reason"], "PrimaryReasserted");
        assert_eq!(core["source"]["component"], "bloodraven");
        assert_eq!(core["reportingComponent"], "bloodraven");
        assert_eq!(core["count"], 3);
        assert_eq!(core["lastTimestamp"], "2026-12-01T12:00:09.000000Z");
        assert_eq!(core["metadata"]["annotations"][MIRROR_ANNOTATION], "42");
        // No series: count 1, lastTimestamp = eventTime.
        let mut single = source.clone();
        single.as_object_mut().map(|map| map.remove("series"));
        let core = to_core(&single, "7");
        assert_eq!(core["count"], 1);
        assert_eq!(core["lastTimestamp"], "2026-12-01T12:00:00.000000Z");
    }
}
