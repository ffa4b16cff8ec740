//! The JSON encoding of responses in the real server's field order
//! (docs/design/history.md#issue-14-item-3).
//!
//! Objects are held as `serde_json::Value`, whose maps are sorted by key. The real server
//! encodes built-in kinds from Go structs: `kind`, `apiVersion`, `metadata`, then the
//! kind's own fields (`spec`, `status`, ...) in declaration order; watch events are
//! `type`, `object`. Custom resources are unstructured maps there, which Go encodes sorted
//! by key, so they keep the sorted order here too. Below `metadata`, nested fields stay in
//! key order (a documented difference).

use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::Serialize;
use serde_json::{Map, Value};

/// How the object being encoded is represented by the real server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// A Go struct: built-in kinds, `Status`, discovery, `Table`, metadata-only objects.
    Typed,
    /// An unstructured map: custom resources and their lists (keys sorted).
    Unstructured,
}

/// `v` encoded as the real server would, for a resource of `form`.
pub fn to_vec(value: &Value, form: Form) -> Vec<u8> {
    serde_json::to_vec(&Encoded { v: value, form }).unwrap_or_default()
}

/// One watch event line (`{"type":..,"object":..}` and a newline).
pub fn watch_line(ty: &str, object: &Value, form: Form) -> Vec<u8> {
    let mut b = serde_json::to_vec(&WatchEvent { ty, object, form }).unwrap_or_default();
    b.push(b'\n');
    b
}

struct WatchEvent<'a> {
    ty: &'a str,
    object: &'a Value,
    form: Form,
}

impl Serialize for WatchEvent<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("type", self.ty)?;
        map.serialize_entry(
            "object",
            &Encoded {
                v: self.object,
                form: self.form,
            },
        )?;
        map.end()
    }
}

/// The `kind` a Status or metadata-only object has, whatever the resource: these are
/// always typed.
fn effective_form(value: &Value, form: Form) -> Form {
    match value.get("kind").and_then(Value::as_str) {
        Some("Status" | "Table" | "PartialObjectMetadata" | "PartialObjectMetadataList") => {
            Form::Typed
        }
        _ => form,
    }
}

struct Encoded<'a> {
    v: &'a Value,
    form: Form,
}

impl Serialize for Encoded<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Value::Object(map) = self.v else {
            return self.v.serialize(s);
        };
        let form = effective_form(self.v, self.form);
        if form == Form::Unstructured {
            return self.v.serialize(s);
        }
        let kind = map.get("kind").and_then(Value::as_str).unwrap_or_default();
        let api_version = map
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        serialize_ordered(map, &top_order(api_version, kind), form, s)
    }
}

/// Key order of the top level of a typed object of `kind`.
fn top_order(api_version: &str, kind: &str) -> Vec<&'static str> {
    let mut order = vec!["kind", "apiVersion", "metadata"];
    order.extend_from_slice(kind_fields(api_version, kind));
    order
}

/// The fields of `kind` after `metadata`, in Go declaration order.
fn kind_fields(api_version: &str, kind: &str) -> &'static [&'static str] {
    match kind {
        "Event" if api_version == "events.k8s.io/v1" => &[
            "eventTime",
            "series",
            "reportingController",
            "reportingInstance",
            "action",
            "reason",
            "regarding",
            "related",
            "note",
            "type",
            "deprecatedSource",
            "deprecatedFirstTimestamp",
            "deprecatedLastTimestamp",
            "deprecatedCount",
        ],
        "Event" => &[
            "involvedObject",
            "reason",
            "message",
            "source",
            "firstTimestamp",
            "lastTimestamp",
            "count",
            "type",
            "eventTime",
            "series",
            "action",
            "related",
            "reportingComponent",
            "reportingInstance",
        ],
        "Status" => &["status", "message", "reason", "details", "code"],
        "ConfigMap" => &["immutable", "data", "binaryData"],
        "Secret" => &["immutable", "data", "stringData", "type"],
        "ServiceAccount" => &[
            "secrets",
            "imagePullSecrets",
            "automountServiceAccountToken",
        ],
        "Endpoints" => &["subsets"],
        "EndpointSlice" => &["addressType", "endpoints", "ports"],
        "Role" | "ClusterRole" => &["rules", "aggregationRule"],
        "RoleBinding" | "ClusterRoleBinding" => &["subjects", "roleRef"],
        "Table" => &["columnDefinitions", "rows"],
        "APIResourceList" => &["groupVersion", "resources"],
        "APIGroupList" => &["groups"],
        "APIGroup" => &["name", "versions", "preferredVersion"],
        "APIVersions" => &["versions", "serverAddressByClientCIDRs"],
        "APIGroupDiscoveryList" => &["items"],
        "Eviction" => &["deleteOptions"],
        "Binding" => &["target"],
        "ControllerRevision" => &["data", "revision"],
        key if key.ends_with("List") => &["items"],
        _ => &["spec", "status"],
    }
}

/// `Status.details` fields in Go declaration order.
const DETAILS_ORDER: &[&str] = &[
    "name",
    "group",
    "kind",
    "uid",
    "causes",
    "retryAfterSeconds",
];

/// ObjectMeta and ListMeta fields in Go declaration order.
const METADATA_ORDER: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "continue",
    "remainingItemCount",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

fn serialize_ordered<S: Serializer>(
    map: &Map<String, Value>,
    order: &[&str],
    form: Form,
    s: S,
) -> Result<S::Ok, S::Error> {
    let mut out = s.serialize_map(Some(map.len()))?;
    for key in order {
        if let Some(v) = map.get(*key) {
            entry(&mut out, key, v, form)?;
        }
    }
    for (key, value) in map.iter().filter(|(k, _)| !order.contains(&k.as_str())) {
        entry(&mut out, key, value, form)?;
    }
    out.end()
}

fn entry<M: SerializeMap>(
    out: &mut M,
    key: &str,
    value: &Value,
    form: Form,
) -> Result<(), M::Error> {
    match (key, value) {
        ("metadata", Value::Object(meta)) => {
            out.serialize_entry(key, &Fields(meta, METADATA_ORDER))
        }
        ("details", Value::Object(map)) => out.serialize_entry(key, &Fields(map, DETAILS_ORDER)),
        ("items", Value::Array(items)) => out.serialize_entry(key, &Items { items, form }),
        _ => out.serialize_entry(key, value),
    }
}

/// A nested map with its known fields first, in `.1`'s order, then the rest by key.
struct Fields<'a>(&'a Map<String, Value>, &'static [&'static str]);

impl Serialize for Fields<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (map, order) = (self.0, self.1);
        let mut out = s.serialize_map(Some(map.len()))?;
        for key in order {
            if let Some(v) = map.get(*key) {
                out.serialize_entry(key, v)?;
            }
        }
        for (key, value) in map.iter().filter(|(k, _)| !order.contains(&k.as_str())) {
            out.serialize_entry(key, value)?;
        }
        out.end()
    }
}

struct Items<'a> {
    items: &'a [Value],
    form: Form,
}

impl Serialize for Items<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.items.len()))?;
        for item in self.items {
            seq.serialize_element(&Encoded {
                v: item,
                form: self.form,
            })?;
        }
        seq.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(value: &Value, form: Form) -> String {
        String::from_utf8(to_vec(value, form)).expect("utf8")
    }

    #[test]
    fn issue14_typed_objects_lead_with_kind_and_api_version() {
        let pod = json!({"status": {}, "spec": {}, "metadata": {"uid": "u", "name": "p"}, "kind": "Pod", "apiVersion": "v1"});
        assert_eq!(
            text(&pod, Form::Typed),
            r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","uid":"u"},"spec":{},"status":{}}"#
        );
        let list = json!({"items": [pod], "metadata": {"resourceVersion": "1"}, "kind": "PodList", "apiVersion": "v1"});
        assert!(text(&list, Form::Typed)
            .starts_with(r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[{"kind":"Pod","apiVersion":"v1","#));
        let cr =
            json!({"spec": {}, "kind": "Gadget", "apiVersion": "example.com/v1", "metadata": {}});
        assert_eq!(
            text(&cr, Form::Unstructured),
            r#"{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{},"spec":{}}"#
        );
        let status = json!({"code": 404, "reason": "NotFound", "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "m",
            "details": {"kind": "configmaps", "group": "", "name": "x"}});
        assert_eq!(
            text(&status, Form::Unstructured),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"m","reason":"NotFound","details":{"name":"x","group":"","kind":"configmaps"},"code":404}"#
        );
        let event = json!({"type": "Normal", "reason": "R", "involvedObject": {}, "kind": "Event", "apiVersion": "v1", "metadata": {}});
        assert_eq!(
            text(&event, Form::Typed),
            r#"{"kind":"Event","apiVersion":"v1","metadata":{},"involvedObject":{},"reason":"R","type":"Normal"}"#
        );
    }
}
