//! List semantics (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`, patchMergeKey)
//! for built-in kinds and for custom resources (from their `openAPIV3Schema`).

use serde_json::{Map, Value};

/// How a list merges.
#[derive(Debug, Clone, PartialEq)]
pub enum ListKind {
    /// Items are objects identified by these keys.
    Map(Vec<String>),
    /// Items are unique scalars.
    Set,
    /// The list is replaced as a whole.
    Atomic,
}

/// The list semantics of one kind.
#[derive(Debug, Clone)]
pub struct Schema {
    /// Kind (`Service` needs its own `ports` keys).
    pub kind: String,
    /// Whether this is a built-in kind (strategic merge is served).
    pub builtin: bool,
    /// The CRD `openAPIV3Schema`.
    pub openapi: Option<Value>,
}

fn builtin_list_kind(kind: &str, path: &[&str]) -> ListKind {
    let names = |v: &[&str]| ListKind::Map(v.iter().map(|s| s.to_string()).collect());
    let last = path.last().copied().unwrap_or_default();
    let parent = if path.len() >= 2 {
        path[path.len() - 2]
    } else {
        ""
    };
    match last {
        "finalizers" if path.len() == 2 && path[0] == "metadata" => ListKind::Set,
        "ownerReferences" if parent == "metadata" => names(&["uid"]),
        "containers" | "initContainers" | "ephemeralContainers" => names(&["name"]),
        "env" | "volumes" | "imagePullSecrets" | "resourceClaims" => names(&["name"]),
        "volumeMounts" => names(&["mountPath"]),
        "volumeDevices" => names(&["devicePath"]),
        "hostAliases" => names(&["ip"]),
        "conditions" => names(&["type"]),
        "topologySpreadConstraints" => names(&["topologyKey", "whenUnsatisfiable"]),
        "ports" if kind == "Service" && path == ["spec", "ports"] => names(&["port", "protocol"]),
        "ports"
            if matches!(
                parent,
                "containers" | "initContainers" | "ephemeralContainers"
            ) =>
        {
            names(&["containerPort", "protocol"])
        }
        "containerStatuses" | "initContainerStatuses" => names(&["name"]),
        _ => ListKind::Atomic,
    }
}

fn schema_at<'a>(schema: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut cur = schema;
    for segment in path {
        // descend through arrays to their items first
        while cur.get("type").and_then(Value::as_str) == Some("array") {
            cur = cur.get("items")?;
        }
        cur = match cur.get("properties").and_then(|p| p.get(*segment)) {
            Some(s) => s,
            None => cur.get("additionalProperties").filter(|a| a.is_object())?,
        };
    }
    Some(cur)
}

impl Schema {
    /// The semantics of the list at `path` (field names from the root, no list keys).
    pub fn list_kind(&self, path: &[&str]) -> ListKind {
        if self.builtin || path.first() == Some(&"metadata") {
            return builtin_list_kind(&self.kind, path);
        }
        let Some(s) = self
            .openapi
            .as_ref()
            .and_then(|object| schema_at(object, path))
        else {
            return ListKind::Atomic;
        };
        match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("map") => ListKind::Map(
                s.get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|key| key.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            Some("set") => ListKind::Set,
            _ => ListKind::Atomic,
        }
    }

    /// The strategic-merge patchMergeKey of the list at `path`, `Some("")` for merged
    /// primitive lists, `None` for replaced lists.
    pub fn merge_key(&self, path: &[&str]) -> Option<String> {
        match self.list_kind(path) {
            ListKind::Map(keys) => keys.into_iter().next(),
            ListKind::Set => Some(String::new()),
            ListKind::Atomic => None,
        }
    }
}

/// The identity of a list item under `keys` (missing `protocol` defaults to TCP, as the
/// built-in schemas default it).
pub fn item_key(item: &Value, keys: &[String]) -> Map<String, Value> {
    let mut sorted: Vec<&String> = keys.iter().collect();
    sorted.sort();
    let mut map = Map::new();
    for key in sorted {
        match item.get(key) {
            Some(value) => {
                map.insert(key.clone(), value.clone());
            }
            None if key == "protocol" => {
                map.insert(key.clone(), Value::String("TCP".into()));
            }
            None => {}
        }
    }
    map
}

/// Whether `v` is a `null` that a default of `schema` replaces (the schema is not
/// `nullable`).
fn defaultable_null(schema: &Value, value: Option<&Value>) -> bool {
    value.map(Value::is_null).unwrap_or(false)
        && schema.get("nullable").and_then(Value::as_bool) != Some(true)
}

/// Applies `default` values of an `openAPIV3Schema` to an object, recursively: to missing
/// fields, and to `null`s where the schema is not `nullable`, as the real server does.
pub fn apply_defaults(schema: &Value, obj: &mut Value) {
    match obj {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (key, property) in props {
                    if !map.contains_key(key) || defaultable_null(property, map.get(key)) {
                        if let Some(d) = property.get("default") {
                            map.insert(key.clone(), d.clone());
                        }
                    }
                    if let Some(v) = map.get_mut(key) {
                        apply_defaults(property, v);
                    }
                }
            } else if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for value in map.values_mut() {
                    if defaultable_null(ap, Some(value)) {
                        if let Some(d) = ap.get("default") {
                            *value = d.clone();
                        }
                    }
                    apply_defaults(ap, value);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for item in items {
                    if defaultable_null(s, Some(item)) {
                        if let Some(default) = s.get("default") {
                            *item = default.clone();
                        }
                    }
                    apply_defaults(s, item);
                }
            }
        }
        _ => {}
    }
}

/// Paths of fields not declared by an `openAPIV3Schema` (for `fieldValidation=Strict`).
pub fn unknown_fields(schema: &Value, obj: &Value, prefix: &str, out: &mut Vec<String>) {
    if schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
    {
        return;
    }
    match obj {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema
                .get("additionalProperties")
                .filter(|a| a.is_object() || a.as_bool() == Some(true));
            if props.is_none() && additional.is_none() {
                // An object without properties in a structural schema is only valid empty;
                // treat it as free-form to stay permissive.
                return;
            }
            for (key, value) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                if prefix.is_empty() && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                match props.and_then(|p| p.get(key)) {
                    Some(s) => unknown_fields(s, value, &path, out),
                    None => match additional {
                        Some(a) if a.is_object() => unknown_fields(a, value, &path, out),
                        Some(_) => {}
                        None => out.push(path),
                    },
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (index, item) in items.iter().enumerate() {
                    unknown_fields(s, item, &format!("{prefix}[{index}]"), out);
                }
            }
        }
        _ => {}
    }
}

/// Drops fields a structural `openAPIV3Schema` does not declare (the real server prunes
/// them unless `x-kubernetes-preserve-unknown-fields`).
pub fn prune(schema: &Value, value: &mut Value, root: bool) {
    if schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
    {
        return;
    }
    match value {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            if props.is_none() && additional.is_none() {
                return;
            }
            m.retain(|k, _| {
                (root && matches!(k.as_str(), "apiVersion" | "kind" | "metadata"))
                    || props.map(|p| p.contains_key(k)).unwrap_or(false)
                    || additional
                        .map(|a| a.is_object() || a.as_bool() == Some(true))
                        .unwrap_or(false)
            });
            for (key, child) in m.iter_mut() {
                if root && key == "metadata" {
                    continue;
                }
                match props.and_then(|map| map.get(key)) {
                    Some(s) => prune(s, child, false),
                    None => {
                        if let Some(a) = additional.filter(|a| a.is_object()) {
                            prune(a, child, false);
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for item in items {
                    prune(s, item, false);
                }
            }
        }
        _ => {}
    }
}
