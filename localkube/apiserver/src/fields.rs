//! Field sets as in structured-merge-diff: the FieldsV1 encoding of `managedFields`
//! (`f:<name>`, `k:{<keys>}`, `v:<value>`, `i:<index>`, `.`), built from objects and used by
//! server-side apply and by update ownership tracking (trap 9).

use super::schema::{item_key, ListKind, Schema};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A tree of owned fields.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSet {
    /// This node itself is owned (`.` when it also has children, `{}` when a leaf).
    pub member: bool,
    /// Owned fields below, by encoded path element.
    pub children: BTreeMap<String, FieldSet>,
}

/// One owned path: encoded elements from the root.
pub type FieldPath = Vec<String>;

/// Metadata fields the server owns, never part of a manager's set.
const SERVER_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "generateName",
];

/// Which part of an object a field set covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everything but server-owned metadata.
    All,
    /// Everything but server-owned metadata and `status` (main resource of a kind with a
    /// status subresource).
    NoStatus,
    /// Only `status` (the status subresource).
    StatusOnly,
}

impl FieldSet {
    /// The fields an object sets, within a scope.
    pub fn from_object(obj: &Value, schema: &Schema, scope: Scope) -> FieldSet {
        let mut root = FieldSet::default();
        let Some(map) = obj.as_object() else {
            return root;
        };
        for (key, value) in map {
            if key == "apiVersion" || key == "kind" || value.is_null() {
                continue;
            }
            match scope {
                Scope::StatusOnly if key != "status" => continue,
                Scope::NoStatus if key == "status" => continue,
                _ => {}
            }
            let child = if key == "metadata" {
                let mut meta = value.clone();
                if let Some(m) = meta.as_object_mut() {
                    for field in SERVER_METADATA {
                        m.remove(*field);
                    }
                }
                if meta.as_object().map(|m| m.is_empty()).unwrap_or(true) {
                    continue;
                }
                build(&meta, schema, &mut vec!["metadata".into()])
            } else {
                build(value, schema, &mut vec![key.clone()])
            };
            root.children.insert(format!("f:{key}"), child);
        }
        root
    }

    /// Whether nothing is owned.
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(|field_set| field_set.is_empty())
    }

    /// Every owned path, with whether it is a leaf (false: a `.` node with children).
    pub fn paths(&self) -> Vec<(FieldPath, bool)> {
        let mut out = Vec::new();
        walk(self, &mut Vec::new(), &mut out);
        out
    }

    /// Whether a path is owned.
    pub fn contains(&self, path: &[String]) -> bool {
        let mut cur = self;
        for p in path {
            match cur.children.get(p) {
                Some(field_set) => cur = field_set,
                None => return false,
            }
        }
        cur.member
    }

    /// Owns a path.
    pub fn insert(&mut self, path: &[String]) {
        let mut cur = self;
        for p in path {
            cur = cur.children.entry(p.clone()).or_default();
        }
        cur.member = true;
    }

    /// Stops owning a path (not what is below it).
    pub fn remove(&mut self, path: &[String]) {
        fn rec(s: &mut FieldSet, path: &[String]) {
            match path.split_first() {
                None => s.member = false,
                Some((first, rest)) => {
                    if let Some(field_set) = s.children.get_mut(first) {
                        rec(field_set, rest);
                        if field_set.is_empty() {
                            s.children.remove(first);
                        }
                    }
                }
            }
        }
        rec(self, path)
    }

    /// Paths owned here and not in `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::default();
        for (p, _) in self.paths() {
            if !other.contains(&p) {
                out.insert(&p);
            }
        }
        out
    }

    /// Paths owned here and in `other`.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::default();
        for (p, _) in self.paths() {
            if other.contains(&p) {
                out.insert(&p);
            }
        }
        out
    }

    /// Paths owned here or in `other`.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        for (p, _) in other.paths() {
            out.insert(&p);
        }
        out
    }

    /// The FieldsV1 JSON.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        if self.member && !self.children.is_empty() {
            map.insert(".".into(), Value::Object(Map::new()));
        }
        for (key, field_set) in &self.children {
            if !field_set.is_empty() {
                map.insert(key.clone(), field_set.to_json());
            }
        }
        Value::Object(map)
    }

    /// Parses FieldsV1 JSON.
    pub fn from_json(value: &Value) -> FieldSet {
        let mut field_set = FieldSet::default();
        match value.as_object() {
            Some(m) if m.is_empty() => field_set.member = true,
            Some(map) => {
                for (key, c) in map {
                    if key == "." {
                        field_set.member = true;
                    } else {
                        field_set
                            .children
                            .insert(key.clone(), FieldSet::from_json(c));
                    }
                }
            }
            None => {}
        }
        field_set
    }
}

fn walk(s: &FieldSet, prefix: &mut Vec<String>, out: &mut Vec<(FieldPath, bool)>) {
    if s.member {
        out.push((prefix.clone(), s.children.is_empty()));
    }
    for (key, field_set) in &s.children {
        prefix.push(key.clone());
        walk(field_set, prefix, out);
        prefix.pop();
    }
}

fn build(value: &Value, schema: &Schema, names: &mut Vec<String>) -> FieldSet {
    let mut field_set = FieldSet::default();
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, c) in map {
                if c.is_null() {
                    continue;
                }
                names.push(k.clone());
                field_set
                    .children
                    .insert(format!("f:{k}"), build(c, schema, names));
                names.pop();
            }
            if field_set.children.is_empty() {
                field_set.member = true;
            }
        }
        Value::Array(items) if !items.is_empty() => {
            let path: Vec<&str> = names.iter().map(String::as_str).collect();
            match schema.list_kind(&path) {
                ListKind::Map(keys) => {
                    for item in items {
                        let key = item_key(item, &keys);
                        let mut child = build(item, schema, names);
                        child.member = true;
                        field_set
                            .children
                            .insert(format!("k:{}", Value::Object(key)), child);
                    }
                }
                ListKind::Set => {
                    for item in items {
                        field_set.children.insert(
                            format!("v:{item}"),
                            FieldSet {
                                member: true,
                                children: BTreeMap::new(),
                            },
                        );
                    }
                }
                ListKind::Atomic => field_set.member = true,
            }
        }
        _ => field_set.member = true,
    }
    field_set
}

fn key_matches(item: &Value, key: &Map<String, Value>) -> bool {
    key.iter().all(|(k, value)| match item.get(k) {
        Some(x) => x == value,
        None => k == "protocol" && value == "TCP",
    })
}

/// The value at an owned path.
pub fn value_at<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = obj;
    for p in path {
        cur = step(cur, p)?;
    }
    Some(cur)
}

fn step<'a>(cur: &'a Value, path: &str) -> Option<&'a Value> {
    if let Some(field) = path.strip_prefix("f:") {
        cur.get(field)
    } else if let Some(k) = path.strip_prefix("k:") {
        let key: Map<String, Value> = serde_json::from_str(k).ok()?;
        cur.as_array()?.iter().find(|i| key_matches(i, &key))
    } else if let Some(value) = path.strip_prefix("v:") {
        let val: Value = serde_json::from_str(value).ok()?;
        cur.as_array()?.iter().find(|i| **i == val)
    } else if let Some(i) = path.strip_prefix("i:") {
        cur.as_array()?.get(i.parse::<usize>().ok()?)
    } else {
        None
    }
}

/// `obj` without what `set` holds, as structured-merge-diff's `RemoveItems`: an owned path
/// (a field, a list item by its keys or value) goes whole, with everything below it (an
/// item's keys, its other fields, defaults the server put in it); a path of which only
/// descendants are in `set` is descended into. Maps and lists that were not empty and the
/// removal empties go as well (the real server's result is `null` there, which a typed
/// object omits).
pub fn remove_items(obj: &Value, set: &FieldSet, schema: &Schema) -> Value {
    let mut out = obj.clone();
    remove_below(&mut out, set, schema, &mut Vec::new());
    out
}

fn emptied(before_empty: bool, value: &Value) -> bool {
    !before_empty && is_empty_container(value)
}

fn is_empty_container(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// Removes the parts of `v` (at field names `names`) that `set` holds.
fn remove_below(value: &mut Value, set: &FieldSet, schema: &Schema, names: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (pe, child) in &set.children {
                let Some(field) = pe.strip_prefix("f:") else {
                    continue;
                };
                if child.member {
                    map.remove(field);
                    continue;
                }
                let Some(x) = map.get_mut(field) else {
                    continue;
                };
                let was_empty = is_empty_container(x);
                names.push(field.to_string());
                remove_below(x, child, schema, names);
                names.pop();
                if emptied(was_empty, x) {
                    map.remove(field);
                }
            }
        }
        Value::Array(items) => {
            let kind = {
                let path: Vec<&str> = names.iter().map(String::as_str).collect();
                schema.list_kind(&path)
            };
            match kind {
                ListKind::Map(keys) => items.retain_mut(|item| {
                    let pe = format!("k:{}", Value::Object(item_key(item, &keys)));
                    match set.children.get(&pe) {
                        None => true,
                        Some(c) if c.member => false,
                        Some(c) => {
                            let was_empty = is_empty_container(item);
                            remove_below(item, c, schema, names);
                            !emptied(was_empty, item)
                        }
                    }
                }),
                ListKind::Set => items.retain(|item| {
                    !set.children
                        .get(&format!("v:{item}"))
                        .map(|field_set| field_set.member)
                        .unwrap_or(false)
                }),
                // Only ever removed whole, by its parent.
                ListKind::Atomic => {}
            }
        }
        _ => {}
    }
}

/// Human form of a path for conflict messages (`.spec.replicas`,
/// `.spec.containers[name="app"].image`).
pub fn display_path(path: &[String]) -> String {
    let mut text = String::new();
    for p in path {
        if let Some(field) = p.strip_prefix("f:") {
            text.push('.');
            text.push_str(field);
        } else if let Some(k) = p.strip_prefix("k:") {
            let key: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
            let inner: Vec<String> = key.iter().map(|(k, v)| format!("{k}={v}")).collect();
            text.push_str(&format!("[{}]", inner.join(",")));
        } else if let Some(value) = p.strip_prefix("v:") {
            text.push_str(&format!("[={value}]"));
        } else if let Some(i) = p.strip_prefix("i:") {
            text.push_str(&format!("[{i}]"));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Schema {
        Schema {
            kind: "Deployment".into(),
            builtin: true,
            openapi: None,
        }
    }

    #[test]
    fn trap9_fieldsv1_encoding_matches_kubernetes() {
        let obj = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "x", "labels": {"a": "b"}, "finalizers": ["f"]},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "app", "image": "i", "ports": [{"containerPort": 80}]}]}}}});
        let field_set = FieldSet::from_object(&obj, &schema(), Scope::NoStatus);
        let j = field_set.to_json();
        assert_eq!(j.pointer("/f:metadata/f:labels/f:a"), Some(&json!({})));
        assert_eq!(
            j.pointer("/f:metadata/f:finalizers/v:\"f\""),
            Some(&json!({}))
        );
        let c = j
            .pointer("/f:spec/f:template/f:spec/f:containers/k:{\"name\":\"app\"}")
            .expect("container key");
        assert_eq!(c.get("."), Some(&json!({})));
        assert!(c
            .pointer("/f:ports/k:{\"containerPort\":80,\"protocol\":\"TCP\"}/.")
            .is_some());
        assert!(j.pointer("/f:metadata/f:name").is_none());
        assert_eq!(FieldSet::from_json(&j), field_set);
    }

    #[test]
    fn value_at_and_remove_items_follow_keys() {
        let obj = json!({"spec": {"containers": [{"name": "a", "image": "1"},
            {"name": "b", "image": "2", "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 81}]}]}});
        let p: Vec<String> = vec![
            "f:spec".into(),
            "f:containers".into(),
            "k:{\"name\":\"b\"}".into(),
            "f:image".into(),
        ];
        assert_eq!(value_at(&obj, &p), Some(&json!("2")));
        // An owned item goes whole, keys and all.
        let mut item = FieldSet::default();
        item.insert(&p[..3]);
        assert_eq!(
            remove_items(&obj, &item, &schema()),
            json!({"spec": {"containers": [{"name": "a", "image": "1"}]}})
        );
        // Below an item: its fields (the defaulted protocol is part of the port's key);
        // a list the removal empties goes.
        let mut below = FieldSet::default();
        below.insert(&p);
        let mut ports = p[..3].to_vec();
        ports.push("f:ports".into());
        for port in [80, 81] {
            let mut q = ports.clone();
            q.push(format!(
                "k:{{\"containerPort\":{port},\"protocol\":\"TCP\"}}"
            ));
            below.insert(&q);
        }
        assert_eq!(
            remove_items(&obj, &below, &schema()),
            json!({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b"}]}})
        );
    }
}
